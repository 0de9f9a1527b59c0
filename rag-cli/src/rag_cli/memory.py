"""``rag memory``: read and edit one user's long-term memory through the retrieval agent's memory API.

The facts live on the service's side (Markdown files under MEMORY_PATH/<user>/, every change a Git
commit); this module only speaks ``/api/v1/memory`` with the retrieval key and never opens the folder,
so the service stays the one writer and every edit made here is committed and re-indexed there.
Replies are read as the service's wire models (``retrieval_agent.api.memory_models``), error bodies as
``shared_contract.error_body.ErrorBody``; timestamps are printed as the service wrote them.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rag_cli.client import UnexpectedReplyError, error_body, json_object, validated
from rag_cli.config import Endpoint
from retrieval_agent.api.memory_models import CommitOut, FactList, FactOut, MemoryLog, WipeResult

TIMEOUT = httpx.Timeout(30.0, connect=10.0)
SHORT_SHA = 8
# An editor named by neither VISUAL nor EDITOR; what git falls back to as well.
FALLBACK_EDITOR = "vi"
# The service's fact-id shape; anything else is not put into a file name (no "../" out of the temp folder).
_SAFE_FILE_STEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
# Exit status of a refused command line (the code `rag sync` uses for usage errors).
USAGE_ERROR = 2

_Model = TypeVar("_Model", bound=BaseModel)


class MemoryApiError(Exception):
    """The memory API refused or failed a request, or did not answer; ``hint`` is the service's advice."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class EditAbortedError(Exception):
    """``rag memory edit`` stopped before sending anything (editor failed, empty text, fact changed)."""


def _failure(response: httpx.Response) -> MemoryApiError:
    """The service's error body as one line plus its hint; anything else (a proxy's page), truncated."""
    body = error_body(response)
    if isinstance(body, str):
        return MemoryApiError(f"HTTP {response.status_code}: {body}")
    label = f"HTTP {response.status_code} {body.code}" if body.code else f"HTTP {response.status_code}"
    message = f"{label}: {body.error[:500]}" if body.error else label
    return MemoryApiError(message, body.hint or None)


@dataclass(frozen=True, slots=True)
class Reply(Generic[_Model]):
    """A 2xx reply: the body as sent (``--json`` prints it; timestamps are shown as written there)
    and as the memory API's wire model."""

    body: dict[str, Any]
    model: _Model


def _as_sent(row: Mapping[str, Any], name: str) -> str:
    # The model parsed it as a datetime; the person sees what the service wrote.
    return str(row[name])


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
    def of(cls, fact: FactOut, row: Mapping[str, Any]) -> Fact:
        """``fact`` as read from ``row``, the JSON object the service sent for it."""
        return cls(
            fact_id=fact.id,
            text=fact.text,
            created_at=_as_sent(row, "created_at"),
            updated_at=_as_sent(row, "updated_at"),
            language=fact.language,
            file=fact.file,
            conversation_id=fact.conversation_id,
            source_message_id=fact.source_message_id,
            deleted_at=None if fact.deleted_at is None else _as_sent(row, "deleted_at"),
            deleted_reason=fact.deleted_reason,
        )

    @classmethod
    def read(cls, reply: Reply[FactOut]) -> Fact:
        return cls.of(reply.model, reply.body)


@dataclass(frozen=True, slots=True)
class Commit:
    """One commit of the user's memory folder (``CommitOut``)."""

    sha: str
    committed_at: str
    subject: str
    body: str = ""

    @classmethod
    def of(cls, commit: CommitOut, row: Mapping[str, Any]) -> Commit:
        """``commit`` as read from ``row``, the JSON object the service sent for it."""
        return cls(sha=commit.sha, committed_at=_as_sent(row, "committed_at"), subject=commit.subject, body=commit.body)


def _rows(body: dict[str, Any], name: str) -> list[dict[str, Any]]:
    # The list the model validated: each item is the object its model row was read from.
    rows: list[dict[str, Any]] = body[name]
    return rows


class MemoryApi:
    """``/api/v1/memory/{user}`` on one retrieval endpoint; every method returns the body and its model."""

    def __init__(self, endpoint: Endpoint, client: httpx.Client) -> None:
        self.endpoint = endpoint
        self.client = client

    def _call(
        self,
        method: str,
        path: str,
        model: type[_Model],
        *,
        params: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
    ) -> Reply[_Model]:
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
            sent = json_object(response)
            return Reply(sent, validated(sent, model))
        except UnexpectedReplyError as exc:
            raise MemoryApiError(str(exc)) from exc

    @staticmethod
    def _fact_path(user: str, fact_id: str) -> str:
        # Path segments are quoted whole: a user or id with "/" or "?" must not become another route.
        return f"{quote(user, safe='')}/facts/{quote(fact_id, safe='')}"

    def facts(self, user: str) -> Reply[FactList]:
        return self._call("GET", f"{quote(user, safe='')}/facts", FactList)

    def fact(self, user: str, fact_id: str) -> Reply[FactOut]:
        return self._call("GET", self._fact_path(user, fact_id), FactOut)

    def add(self, user: str, text: str, *, language: str | None) -> Reply[FactOut]:
        body: dict[str, Any] = {"text": text}
        if language is not None:
            body["language"] = language
        return self._call("POST", f"{quote(user, safe='')}/facts", FactOut, body=body)

    def update(self, user: str, fact_id: str, text: str) -> Reply[FactOut]:
        # No language: the fact keeps its own.
        return self._call("PUT", self._fact_path(user, fact_id), FactOut, body={"text": text})

    def forget(self, user: str, fact_id: str, *, reason: str | None) -> Reply[FactOut]:
        params = {"reason": reason} if reason is not None else None
        return self._call("DELETE", self._fact_path(user, fact_id), FactOut, params=params)

    def log(self, user: str, *, fact_id: str | None, limit: int | None) -> Reply[MemoryLog]:
        params: dict[str, str] = {}
        if limit is not None:
            params["limit"] = str(limit)
        if fact_id is not None:
            params["fact_id"] = fact_id
        return self._call("GET", f"{quote(user, safe='')}/log", MemoryLog, params=params)

    def wipe(self, user: str) -> Reply[WipeResult]:
        return self._call("DELETE", quote(user, safe=""), WipeResult)


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
                reply = api.fact(user, fact_id)
                if as_json:
                    self._json(reply.body)
                    return 0
                fact = Fact.read(reply)
                self.out.print(fact_details(fact))
                self.out.print()
                self.out.print(escape(fact.text), soft_wrap=True)
                return 0
            listing = api.facts(user)
            if as_json:
                self._json(listing.body)
                return 0
            facts = [
                Fact.of(fact, row) for fact, row in zip(listing.model.facts, _rows(listing.body, "facts"), strict=True)
            ]
            if facts:
                self.out.print(facts_table(user, facts))
            else:
                self.out.print(f"{escape(user)} has no facts", soft_wrap=True)
            # Files the service could not read are neither recalled nor listed: a person should fix them.
            for item in listing.model.unreadable:
                name, problem = escape(item.file_name), escape(item.problem)
                self.err.print(f"[yellow]warning: unreadable {name}: {problem}[/yellow]", soft_wrap=True)
            return 0

        return self._run(action)

    def log(self, user: str, *, fact_id: str | None = None, limit: int | None = None, as_json: bool = False) -> int:
        """The commits of the user's memory folder, newest first: short sha, date, subject, indented body."""

        def action(api: MemoryApi) -> int:
            history = api.log(user, fact_id=fact_id, limit=limit)
            if as_json:
                self._json(history.body)
                return 0
            commits = [
                Commit.of(commit, row)
                for commit, row in zip(history.model.commits, _rows(history.body, "commits"), strict=True)
            ]
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
            fact = Fact.read(api.fact(user, fact_id))
            edited = (text if text is not None else edit_in_editor(fact)).strip()
            if not edited:
                raise EditAbortedError("the text is empty: nothing sent (`rag memory forget` deletes a fact)")
            if edited == fact.text.strip():
                self.out.print(f"{escape(fact.fact_id)} unchanged: nothing sent", soft_wrap=True)
                return 0
            if text is None:
                # The agent may have rewritten the fact while the editor was open: do not overwrite that
                # blindly (the API has no version check); the person's text is printed so it is not lost.
                now = Fact.read(api.fact(user, fact_id))
                if now.updated_at != fact.updated_at:
                    raise EditAbortedError(
                        f"{fact.fact_id} changed while you edited it (updated_at {now.updated_at}): nothing sent. "
                        f"Your text:\n{edited}"
                    )
            updated = Fact.read(api.update(user, fact_id, edited))
            self.out.print(f"updated {escape(updated.fact_id)}: {escape(updated.text)}", soft_wrap=True)
            return 0

        return self._run(action)

    def add(self, user: str, text: str, *, language: str | None = None) -> int:
        """Remember a new fact (committed as ADD); prints its id."""

        def action(api: MemoryApi) -> int:
            fact = Fact.read(api.add(user, text, language=language))
            self.out.print(f"added {escape(fact.fact_id)}: {escape(fact.text)}", soft_wrap=True)
            return 0

        return self._run(action)

    def forget(self, user: str, fact_id: str, *, reason: str | None = None) -> int:
        """Delete a fact: the service moves it to deleted/ with the reason (committed as DELETE)."""

        def action(api: MemoryApi) -> int:
            fact = Fact.read(api.forget(user, fact_id, reason=reason))
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
            wiped = api.wipe(user).model.wiped
            message = f"wiped the memory of {user!r}" if wiped else f"{user!r} had no memory: nothing to wipe"
            self.out.print(escape(message), soft_wrap=True)
            return 0

        return self._run(action)
