"""``rag memory``: read and edit one user's long-term memory through the retrieval agent's memory API.

The facts live on the service's side (Markdown files under MEMORY_PATH/<user>/, every change a Git
commit); this module only speaks ``/api/v1/memory`` with the retrieval key and never opens the folder,
so the service stays the one writer and every edit made here is committed and re-indexed there.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rag_cli.client import UnexpectedReplyError, json_object
from rag_cli.config import Endpoint

TIMEOUT = httpx.Timeout(30.0, connect=10.0)
SHORT_SHA = 8
# An editor named by neither VISUAL nor EDITOR; what git falls back to as well.
FALLBACK_EDITOR = "vi"
# The service's fact-id shape; anything else is not put into a file name (no "../" out of the temp folder).
_SAFE_FILE_STEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
# Exit status of a refused command line (the code `rag sync` uses for usage errors).
USAGE_ERROR = 2


class MemoryApiError(Exception):
    """The memory API refused or failed a request, or did not answer; ``hint`` is the service's advice."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class EditAbortedError(Exception):
    """``rag memory edit`` stopped before sending anything (editor failed, empty text, fact changed)."""


def _failure(response: httpx.Response) -> MemoryApiError:
    """The flat error body ``{error, code, hint}`` as one line plus its hint; anything else, truncated."""
    try:
        body: Any = response.json()
    except ValueError:
        return MemoryApiError(f"HTTP {response.status_code}: {response.text[:200]}")
    if isinstance(body, dict):
        # FastAPI's own {"detail": ...} still reaches us from anything in front of the service.
        error, code, hint = body.get("error") or body.get("detail"), body.get("code"), body.get("hint")
        if error or code:
            label = f"HTTP {response.status_code} {code}" if code else f"HTTP {response.status_code}"
            message = f"{label}: {str(error)[:500]}" if error else label
            return MemoryApiError(message, hint if isinstance(hint, str) else None)
    return MemoryApiError(f"HTTP {response.status_code}: {str(body)[:200]}")


def _text(row: dict[str, Any], name: str) -> str:
    value = row.get(name)
    if not isinstance(value, str):
        raise MemoryApiError(f"unexpected reply: {name!r} missing in {str(row)[:200]}")
    return value


def _optional(row: dict[str, Any], name: str) -> str | None:
    value = row.get(name)
    return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class Fact:
    """One fact as ``FactOut`` sends it: its file's front matter and text."""

    fact_id: str
    text: str
    created_at: str
    updated_at: str
    language: str | None = None
    file: str | None = None
    conversation_id: str | None = None
    source_message_id: str | None = None
    deleted_at: str | None = None
    deleted_reason: str | None = None

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> Fact:
        return cls(
            fact_id=_text(row, "id"),
            text=_text(row, "text"),
            created_at=_text(row, "created_at"),
            updated_at=_text(row, "updated_at"),
            language=_optional(row, "language"),
            file=_optional(row, "file"),
            conversation_id=_optional(row, "conversation_id"),
            source_message_id=_optional(row, "source_message_id"),
            deleted_at=_optional(row, "deleted_at"),
            deleted_reason=_optional(row, "deleted_reason"),
        )


@dataclass(frozen=True, slots=True)
class Commit:
    """One commit of the user's memory folder (``CommitOut``)."""

    sha: str
    committed_at: str
    subject: str
    body: str = ""

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> Commit:
        return cls(
            sha=_text(row, "sha"),
            committed_at=_text(row, "committed_at"),
            subject=_text(row, "subject"),
            body=_optional(row, "body") or "",
        )


def _rows(body: dict[str, Any], name: str) -> list[dict[str, Any]]:
    rows = body.get(name)
    if not isinstance(rows, list):
        raise MemoryApiError(f"unexpected reply: no {name!r} list in {str(body)[:200]}")
    return [row for row in rows if isinstance(row, dict)]


class MemoryApi:
    """``/api/v1/memory/{user}`` on one retrieval endpoint; every method returns the raw JSON body."""

    def __init__(self, endpoint: Endpoint, client: httpx.Client) -> None:
        self.endpoint = endpoint
        self.client = client

    def _call(
        self, method: str, path: str, *, params: dict[str, str] | None = None, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        url = f"{self.endpoint.url}/api/v1/memory/{path}"
        try:
            response = self.client.request(method, url, params=params, json=body, headers=self.endpoint.headers)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise MemoryApiError(
                f"the retrieval service at {self.endpoint.url} did not answer ({type(exc).__name__}: {exc})",
                "Is it running? The URL comes from --url, else RAG_RETRIEVAL_URL, else the `rag dev` default.",
            ) from exc
        if response.status_code >= 400:
            raise _failure(response)
        try:
            return json_object(response)
        except UnexpectedReplyError as exc:
            raise MemoryApiError(str(exc)) from exc

    @staticmethod
    def _fact_path(user: str, fact_id: str) -> str:
        # Path segments are quoted whole: a user or id with "/" or "?" must not become another route.
        return f"{quote(user, safe='')}/facts/{quote(fact_id, safe='')}"

    def facts(self, user: str) -> dict[str, Any]:
        return self._call("GET", f"{quote(user, safe='')}/facts")

    def fact(self, user: str, fact_id: str) -> dict[str, Any]:
        return self._call("GET", self._fact_path(user, fact_id))

    def add(self, user: str, text: str, *, language: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {"text": text}
        if language is not None:
            body["language"] = language
        return self._call("POST", f"{quote(user, safe='')}/facts", body=body)

    def update(self, user: str, fact_id: str, text: str) -> dict[str, Any]:
        # No language: the fact keeps its own.
        return self._call("PUT", self._fact_path(user, fact_id), body={"text": text})

    def forget(self, user: str, fact_id: str, *, reason: str | None) -> dict[str, Any]:
        params = {"reason": reason} if reason is not None else None
        return self._call("DELETE", self._fact_path(user, fact_id), params=params)

    def log(self, user: str, *, fact_id: str | None, limit: int | None) -> dict[str, Any]:
        params: dict[str, str] = {}
        if limit is not None:
            params["limit"] = str(limit)
        if fact_id is not None:
            params["fact_id"] = fact_id
        return self._call("GET", f"{quote(user, safe='')}/log", params=params)

    def wipe(self, user: str) -> dict[str, Any]:
        return self._call("DELETE", quote(user, safe=""))


def _when(value: str) -> str:
    """A timestamp in local time to the minute, for tables; the raw value when it does not parse."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return value
    return (moment.astimezone() if moment.tzinfo is not None else moment).strftime("%Y-%m-%d %H:%M")


def facts_table(user: str, facts: list[Fact]) -> Table:
    """One row per fact: id (never cut, it is what edit and forget take), last update, text."""
    table = Table(title=f"Memory of {escape(user)}")
    table.add_column("id", no_wrap=True)
    table.add_column("updated", no_wrap=True)
    table.add_column("text", overflow="fold")
    for fact in facts:
        table.add_row(escape(fact.fact_id), _when(fact.updated_at), escape(fact.text))
    table.caption = f"{len(facts)} fact{'' if len(facts) == 1 else 's'}"
    return table


def fact_details(fact: Fact) -> Table:
    """The front-matter fields as the file holds them (optional ones only when set)."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    fields: list[tuple[str, str | None]] = [
        ("id", fact.fact_id),
        ("language", fact.language),
        ("created_at", fact.created_at),
        ("updated_at", fact.updated_at),
        ("conversation_id", fact.conversation_id),
        ("source_message_id", fact.source_message_id),
        ("deleted_at", fact.deleted_at),
        ("deleted_reason", fact.deleted_reason),
        ("file", fact.file),
    ]
    for name, value in fields:
        if value is not None:
            grid.add_row(name, escape(value))
    return grid


def editor_command() -> list[str]:
    """$VISUAL, else $EDITOR, else vi; split as a shell would, so ``code --wait`` works."""
    for name in ("VISUAL", "EDITOR"):
        value = os.environ.get(name, "").strip()
        if value:
            try:
                return shlex.split(value)
            except ValueError as exc:
                raise EditAbortedError(f"cannot read ${name} {value!r} as a command ({exc})") from exc
    return [FALLBACK_EDITOR]


def edit_in_editor(fact: Fact) -> str:
    """Open the user's editor on a temporary ``<id>.md`` holding the fact's text; the text it was saved with."""
    command = editor_command()
    with tempfile.TemporaryDirectory(prefix="rag-memory-") as folder:
        stem = fact.fact_id if _SAFE_FILE_STEM.fullmatch(fact.fact_id) else "fact"
        path = Path(folder) / f"{stem}.md"
        path.write_text(fact.text + "\n", encoding="utf-8")
        try:
            # The person's own editor on a file we named: no shell, and the service supplies no argument.
            finished = subprocess.run([*command, str(path)], check=False)  # noqa: S603
        except OSError as exc:
            raise EditAbortedError(f"cannot start the editor {command[0]!r} ({exc}); set VISUAL or EDITOR") from exc
        if finished.returncode != 0:
            raise EditAbortedError(f"the editor {command[0]!r} exited with status {finished.returncode}")
        return path.read_text(encoding="utf-8")


@dataclass(slots=True)
class MemoryCommands:
    """The ``rag memory`` subcommands; each returns the exit status (0 ok, 1 failed, 2 refused)."""

    endpoint: Endpoint
    out: Console = field(default_factory=Console)
    err: Console = field(default_factory=lambda: Console(stderr=True))

    def _run(self, action: Callable[[MemoryApi], int]) -> int:
        try:
            with httpx.Client(timeout=TIMEOUT) as client:
                return action(MemoryApi(self.endpoint, client))
        except MemoryApiError as exc:
            self.err.print(f"[red]rag memory: {escape(str(exc))}[/red]", soft_wrap=True)
            if exc.hint:
                self.err.print(f"hint: {escape(exc.hint)}", soft_wrap=True)
        except EditAbortedError as exc:
            self.err.print(f"[red]rag memory edit: {escape(str(exc))}[/red]", soft_wrap=True)
        return 1

    def _json(self, body: dict[str, Any]) -> None:
        self.out.print_json(json.dumps(body, ensure_ascii=False))

    def show(self, user: str, fact_id: str | None, *, as_json: bool = False) -> int:
        """Without ``fact_id`` a table of the user's facts (and a warning per unreadable file); else one fact."""

        def action(api: MemoryApi) -> int:
            if fact_id is not None:
                body = api.fact(user, fact_id)
                if as_json:
                    self._json(body)
                    return 0
                fact = Fact.from_json(body)
                self.out.print(fact_details(fact))
                self.out.print()
                self.out.print(escape(fact.text), soft_wrap=True)
                return 0
            body = api.facts(user)
            if as_json:
                self._json(body)
                return 0
            facts = [Fact.from_json(row) for row in _rows(body, "facts")]
            if facts:
                self.out.print(facts_table(user, facts))
            else:
                self.out.print(f"{escape(user)} has no facts", soft_wrap=True)
            # Files the service could not read are neither recalled nor listed: a person should fix them.
            unreadable = body.get("unreadable")
            for row in unreadable if isinstance(unreadable, list) else []:
                if isinstance(row, dict):
                    name, problem = escape(str(row.get("file_name"))), escape(str(row.get("problem")))
                    self.err.print(f"[yellow]warning: unreadable {name}: {problem}[/yellow]", soft_wrap=True)
            return 0

        return self._run(action)

    def log(self, user: str, *, fact_id: str | None = None, limit: int | None = None, as_json: bool = False) -> int:
        """The commits of the user's memory folder, newest first: short sha, date, subject, indented body."""

        def action(api: MemoryApi) -> int:
            body = api.log(user, fact_id=fact_id, limit=limit)
            if as_json:
                self._json(body)
                return 0
            commits = [Commit.from_json(row) for row in _rows(body, "commits")]
            if not commits:
                self.out.print(f"no history for {escape(user)}", soft_wrap=True)
            for commit in commits:
                head = f"[yellow]{escape(commit.sha[:SHORT_SHA])}[/yellow]  {_when(commit.committed_at)}"
                self.out.print(f"{head}  {escape(commit.subject)}", soft_wrap=True)
                for line in commit.body.strip("\n").splitlines():
                    self.out.print(f"    {escape(line)}".rstrip(), soft_wrap=True)
            return 0

        return self._run(action)

    def edit(self, user: str, fact_id: str, *, text: str | None = None) -> int:
        """Replace a fact's text, from ``text`` or the user's editor; nothing is sent when unchanged or empty."""

        def action(api: MemoryApi) -> int:
            fact = Fact.from_json(api.fact(user, fact_id))
            edited = (text if text is not None else edit_in_editor(fact)).strip()
            if not edited:
                raise EditAbortedError("the text is empty: nothing sent (`rag memory forget` deletes a fact)")
            if edited == fact.text.strip():
                self.out.print(f"{escape(fact.fact_id)} unchanged: nothing sent", soft_wrap=True)
                return 0
            if text is None:
                # The agent may have rewritten the fact while the editor was open: do not overwrite that
                # blindly (the API has no version check); the person's text is printed so it is not lost.
                now = Fact.from_json(api.fact(user, fact_id))
                if now.updated_at != fact.updated_at:
                    raise EditAbortedError(
                        f"{fact.fact_id} changed while you edited it (updated_at {now.updated_at}): nothing sent. "
                        f"Your text:\n{edited}"
                    )
            updated = Fact.from_json(api.update(user, fact_id, edited))
            self.out.print(f"updated {escape(updated.fact_id)}: {escape(updated.text)}", soft_wrap=True)
            return 0

        return self._run(action)

    def add(self, user: str, text: str, *, language: str | None = None) -> int:
        """Remember a new fact (committed as ADD); prints its id."""

        def action(api: MemoryApi) -> int:
            fact = Fact.from_json(api.add(user, text, language=language))
            self.out.print(f"added {escape(fact.fact_id)}: {escape(fact.text)}", soft_wrap=True)
            return 0

        return self._run(action)

    def forget(self, user: str, fact_id: str, *, reason: str | None = None) -> int:
        """Delete a fact: the service moves it to deleted/ with the reason (committed as DELETE)."""

        def action(api: MemoryApi) -> int:
            fact = Fact.from_json(api.forget(user, fact_id, reason=reason))
            where = f" (moved to {escape(fact.file)})" if fact.file else ""
            self.out.print(f"forgot {escape(fact.fact_id)}{where}: {escape(fact.text)}", soft_wrap=True)
            return 0

        return self._run(action)

    def wipe(self, user: str, *, confirmed: bool) -> int:
        """Forget the user entirely (facts, history, index entries); refused (exit 2) unless ``confirmed``."""
        if not confirmed:
            self.err.print(
                f"rag memory wipe: this deletes every fact of {escape(repr(user))} and its history for good; "
                "add --yes to do it",
                soft_wrap=True,
            )
            return USAGE_ERROR

        def action(api: MemoryApi) -> int:
            wiped = api.wipe(user).get("wiped") is True
            message = f"wiped the memory of {user!r}" if wiped else f"{user!r} had no memory: nothing to wipe"
            self.out.print(escape(message), soft_wrap=True)
            return 0

        return self._run(action)
