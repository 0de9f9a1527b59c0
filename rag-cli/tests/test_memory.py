"""``rag memory`` through ``main()`` against a scripted memory API on loopback that checks the key and
records every request, speaking the retrieval agent's wire format (``api/memory_models.py``)."""

from __future__ import annotations

import json
import shlex
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from rag_cli.__main__ import main
from rag_cli.config import Endpoint
from rag_cli.memory import MemoryApi
from retrieval_agent.api.memory_models import CommitOut, FactList, FactOut, MemoryLog, UnreadableFile, WipeResult

from .conftest import RETRIEVAL_KEY, error_reply, serving  # noqa: TID252

TEA = "0b7c4f0e-6a51-4f1e-9a47-0c1d2e3f4a5b"
BERLIN = "5d2e9a10-1b2c-4d3e-8f90-a1b2c3d4e5f6"


def fact_row(fact_id: str, text: str, updated_at: str, **extra: Any) -> dict[str, Any]:
    """A fact as the service sends it (``FactOut``)."""
    fields: dict[str, Any] = {
        "id": fact_id,
        "text": text,
        "created_at": "2025-03-01T09:00:00Z",
        "updated_at": updated_at,
        "conversation_id": "conv-1",
        "language": "en",
        "file": f"alice/{fact_id}.md",
        **extra,
    }
    return FactOut.model_validate(fields).model_dump(mode="json")


def error(status: int, code: str, message: str, hint: str) -> JSONResponse:
    return error_reply(status, code, message, hint=hint)


def sent(model: FactList | MemoryLog | WipeResult) -> JSONResponse:
    return JSONResponse(model.model_dump(mode="json"))


class FakeMemory:
    """Alice's memory; ``requests`` records (method, path, query, JSON body) of every authorised call."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []
        self.stored = {
            TEA: fact_row(TEA, "Alice prefers [green] tea over coffee.", "2025-03-02T10:00:00Z"),
            BERLIN: fact_row(BERLIN, "Alice lives in Berlin.", "2025-03-01T09:00:00Z"),
        }
        self.enabled = True
        # Set: every read after the first sees the fact updated (the agent wrote meanwhile).
        self.changes_after_first_read = False
        self.reads = 0

    async def _record(self, request: Request) -> JSONResponse | None:
        body = await request.json() if await request.body() else None
        self.requests.append((request.method, request.url.path, dict(request.query_params), body))
        if request.headers.get("authorization") != f"Bearer {RETRIEVAL_KEY}":
            return error(401, "UNAUTHORIZED", "Invalid or missing API key.", "Send Authorization: Bearer <key>.")
        if not self.enabled:
            return error(
                503,
                "MEMORY_DISABLED",
                "Long-term memory is disabled (ENABLE_MEMORY=false).",
                "Long-term memory is off: set ENABLE_MEMORY=true (and MEMORY_PATH) on the retrieval agent.",
            )
        return None

    def _missing(self, request: Request) -> JSONResponse | None:
        fact_id = request.path_params["fact_id"]
        if request.path_params["user"] != "alice" or fact_id not in self.stored:
            return error(
                404,
                "FACT_NOT_FOUND",
                f"No fact {fact_id!r} in the memory of {request.path_params['user']!r}.",
                "GET /api/v1/memory/{user}/facts lists the user's facts.",
            )
        return None

    async def facts(self, request: Request) -> JSONResponse:
        if refused := await self._record(request):
            return refused
        if request.method == "POST":
            body = self.requests[-1][3]
            row = fact_row("new-fact", body["text"], "2025-03-03T08:00:00Z", language=body.get("language") or "")
            return JSONResponse(row, status_code=201)
        if request.path_params["user"] != "alice":
            return sent(FactList(user=request.path_params["user"], facts=[]))
        rows = sorted(self.stored.values(), key=lambda row: row["updated_at"], reverse=True)
        unreadable = [UnreadableFile(file_name="broken.md", problem="no YAML front matter")]
        facts = [FactOut.model_validate(row) for row in rows]
        return sent(FactList(user="alice", facts=facts, unreadable=unreadable))

    async def fact(self, request: Request) -> JSONResponse:
        if refused := await self._record(request) or self._missing(request):
            return refused
        row = self.stored[request.path_params["fact_id"]]
        if request.method == "GET":
            self.reads += 1
            if self.changes_after_first_read and self.reads > 1:
                row["updated_at"] = "2025-03-04T12:00:00Z"
            return JSONResponse(row)
        if request.method == "PUT":
            row.update(text=self.requests[-1][3]["text"], updated_at="2025-03-05T12:00:00Z")
            return JSONResponse(row)
        reason = request.query_params.get("reason")
        moved = self.stored.pop(request.path_params["fact_id"])
        moved.update(file=f"alice/deleted/{moved['id']}.md", deleted_at="2025-03-06T12:00:00Z", deleted_reason=reason)
        return JSONResponse(moved)

    async def log(self, request: Request) -> JSONResponse:
        if refused := await self._record(request):
            return refused
        commits = [
            CommitOut.model_validate(
                {
                    "sha": "a1b2c3d4e5f6a7b8c9d0a1b2c3d4e5f6a7b8c9d0",
                    "committed_at": "2025-03-02T10:00:00Z",
                    "author": "retrieval-agent",
                    "subject": "UPDATE: Alice prefers tea over coffee.",
                    "body": f"Why: she said so\nFact: {TEA}\n",
                    "files": [f"{TEA}.md"],
                }
            ),
            CommitOut.model_validate(
                {
                    "sha": "ffee0011223344556677889900aabbccddeeff00",
                    "committed_at": "2025-03-01T09:00:00Z",
                    "author": "retrieval-agent",
                    "subject": "INIT: memory of alice",
                    "body": "",
                    "files": [],
                }
            ),
        ]
        return sent(MemoryLog(user="alice", commits=commits))

    async def wipe(self, request: Request) -> JSONResponse:
        if refused := await self._record(request):
            return refused
        wiped = request.path_params["user"] == "alice" and bool(self.stored)
        self.stored.clear()
        return sent(WipeResult(user=request.path_params["user"], wiped=wiped))

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/api/v1/memory/{user}/facts", self.facts, methods=["GET", "POST"]),
                Route("/api/v1/memory/{user}/facts/{fact_id}", self.fact, methods=["GET", "PUT", "DELETE"]),
                Route("/api/v1/memory/{user}/log", self.log),
                Route("/api/v1/memory/{user}", self.wipe, methods=["DELETE"]),
            ]
        )

    def writes(self) -> list[tuple[str, str, dict[str, str], Any]]:
        return [request for request in self.requests if request[0] != "GET"]


@pytest.fixture
def memory(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMemory]:
    fake = FakeMemory()
    with serving(fake.app()) as url:
        monkeypatch.setenv("RAG_RETRIEVAL_URL", url)
        monkeypatch.setenv("RETRIEVAL_API_KEY", RETRIEVAL_KEY)
        # Wide enough that rich never folds a fact id or a line the assertions look for.
        monkeypatch.setenv("COLUMNS", "200")
        for name in ("VISUAL", "EDITOR"):
            monkeypatch.delenv(name, raising=False)
        yield fake


def use_editor(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, new_text: str | None, *, variable: str = "EDITOR"
) -> Path:
    """``variable`` names a Python script that saves what it was given to ``seen-<variable>.txt`` and, unless
    ``new_text`` is None, rewrites the file with it; returns the path of that record."""
    seen = tmp_path / f"seen-{variable}.txt"
    script = tmp_path / f"editor-{variable}.py"
    script.write_text(
        "import pathlib, sys\n"
        "target = pathlib.Path(sys.argv[1])\n"
        f"pathlib.Path({str(seen)!r}).write_text(target.name + '\\n' + target.read_text())\n"
        f"new = {new_text!r}\n"
        "if new is not None:\n"
        "    target.write_text(new)\n"
    )
    monkeypatch.setenv(variable, shlex.join([sys.executable, str(script)]))
    return seen


def test_show_lists_the_facts_and_warns_about_unreadable_files(
    memory: FakeMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["memory", "show", "alice"]) == 0
    captured = capsys.readouterr()
    assert TEA in captured.out
    assert BERLIN in captured.out
    # Fact text is shown as written, never read as rich markup.
    assert "Alice prefers [green] tea over coffee." in captured.out
    assert captured.out.index(TEA) < captured.out.index(BERLIN)  # newest update first, as the service sends
    assert "2 facts" in captured.out
    assert "warning: unreadable broken.md: no YAML front matter" in captured.err
    assert memory.requests == [("GET", "/api/v1/memory/alice/facts", {}, None)]

    assert main(["memory", "show", "alice", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert [row["id"] for row in body["facts"]] == [TEA, BERLIN]

    assert main(["memory", "show", "bob"]) == 0
    assert "bob has no facts" in capsys.readouterr().out


def test_show_one_fact_in_full(memory: FakeMemory, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "show", "alice", BERLIN]) == 0
    out = capsys.readouterr().out
    for expected in (
        BERLIN,
        "created_at",
        "2025-03-01T09:00:00Z",
        "conv-1",
        f"alice/{BERLIN}.md",
        "Alice lives in Berlin.",
    ):
        assert expected in out
    assert "deleted_at" not in out  # unset optional fields are left out
    assert memory.requests[-1][:2] == ("GET", f"/api/v1/memory/alice/facts/{BERLIN}")


def test_log_prints_short_shas_subjects_and_indented_bodies(
    memory: FakeMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["memory", "log", "alice", "--fact", TEA, "--limit", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("a1b2c3d4  ")
    assert lines[0].endswith("  UPDATE: Alice prefers tea over coffee.")
    assert lines[1:3] == ["    Why: she said so", f"    Fact: {TEA}"]
    assert lines[3].startswith("ffee0011  ")
    assert lines[3].endswith("INIT: memory of alice")
    assert memory.requests == [("GET", "/api/v1/memory/alice/log", {"fact_id": TEA, "limit": "5"}, None)]

    assert main(["memory", "log", "alice", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["commits"][1]["subject"] == "INIT: memory of alice"
    assert memory.requests[-1][2] == {}

    assert main(["memory", "log", "alice", "--limit", "0"]) == 2
    assert "--limit must be at least 1" in capsys.readouterr().err


def test_edit_sends_the_text_the_editor_saved(
    memory: FakeMemory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen = use_editor(monkeypatch, tmp_path, "Alice prefers green tea.\n\n")
    assert main(["memory", "edit", "alice", TEA]) == 0
    # The editor got a <id>.md file holding the fact's text.
    assert seen.read_text() == f"{TEA}.md\nAlice prefers [green] tea over coffee.\n"
    assert memory.writes() == [
        ("PUT", f"/api/v1/memory/alice/facts/{TEA}", {}, {"text": "Alice prefers green tea."}),
    ]
    assert f"updated {TEA}: Alice prefers green tea." in capsys.readouterr().out


def test_visual_wins_over_editor(memory: FakeMemory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    use_editor(monkeypatch, tmp_path, "from EDITOR")
    use_editor(monkeypatch, tmp_path, "from VISUAL", variable="VISUAL")
    assert main(["memory", "edit", "alice", BERLIN]) == 0
    assert memory.writes()[0][3] == {"text": "from VISUAL"}


def test_an_unchanged_edit_sends_nothing(
    memory: FakeMemory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen = use_editor(monkeypatch, tmp_path, None)
    assert main(["memory", "edit", "alice", BERLIN]) == 0
    assert seen.exists()
    assert memory.writes() == []
    assert "unchanged: nothing sent" in capsys.readouterr().out
    # --text equal to the current text (up to surrounding blanks) is no change either.
    assert main(["memory", "edit", "alice", BERLIN, "--text", " Alice lives in Berlin. "]) == 0
    assert memory.writes() == []


def test_an_emptied_edit_aborts(
    memory: FakeMemory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    use_editor(monkeypatch, tmp_path, "  \n")
    assert main(["memory", "edit", "alice", BERLIN]) == 1
    assert "the text is empty: nothing sent" in capsys.readouterr().err
    assert memory.writes() == []


def test_edit_with_text_needs_no_editor(
    memory: FakeMemory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("EDITOR", str(tmp_path / "no-such-editor"))
    assert main(["memory", "edit", "alice", BERLIN, "--text", "Alice moved to Hamburg."]) == 0
    assert memory.writes() == [
        ("PUT", f"/api/v1/memory/alice/facts/{BERLIN}", {}, {"text": "Alice moved to Hamburg."}),
    ]
    # Without --text that editor cannot start: reported, nothing sent.
    assert main(["memory", "edit", "alice", BERLIN]) == 1
    assert "cannot start the editor" in capsys.readouterr().err
    assert len(memory.writes()) == 1


def test_edit_refuses_to_overwrite_a_fact_changed_meanwhile(
    memory: FakeMemory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    use_editor(monkeypatch, tmp_path, "Alice lives in Munich.")
    memory.changes_after_first_read = True
    assert main(["memory", "edit", "alice", BERLIN]) == 1
    err = capsys.readouterr().err
    assert "changed while you edited it" in err
    assert "Alice lives in Munich." in err  # the person's text is not lost
    assert memory.writes() == []


def test_a_missing_fact_prints_the_error_and_hint(
    memory: FakeMemory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen = use_editor(monkeypatch, tmp_path, "never")
    for argv in (["memory", "show", "alice", "nope"], ["memory", "edit", "alice", "nope"]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert "HTTP 404 FACT_NOT_FOUND: No fact 'nope' in the memory of 'alice'." in err
        assert "hint: GET /api/v1/memory/{user}/facts lists the user's facts." in err
    assert not seen.exists()  # no editor for a fact that is not there
    assert memory.writes() == []


def test_disabled_memory_and_a_wrong_key_are_reported(
    memory: FakeMemory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory.enabled = False
    assert main(["memory", "log", "alice"]) == 1
    err = capsys.readouterr().err
    assert "HTTP 503 MEMORY_DISABLED" in err
    assert "set ENABLE_MEMORY=true" in err
    monkeypatch.setenv("RETRIEVAL_API_KEY", "wrong")
    assert main(["memory", "show", "alice"]) == 1
    assert "HTTP 401 UNAUTHORIZED" in capsys.readouterr().err


def test_add_and_forget(memory: FakeMemory, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "add", "alice", "Alice is allergic to nuts.", "--language", "en"]) == 0
    assert "added new-fact: Alice is allergic to nuts." in capsys.readouterr().out
    assert main(["memory", "forget", "alice", TEA, "--reason", "no longer true"]) == 0
    assert f"forgot {TEA} (moved to alice/deleted/{TEA}.md)" in capsys.readouterr().out
    assert main(["memory", "forget", "alice", BERLIN]) == 0
    assert memory.writes() == [
        ("POST", "/api/v1/memory/alice/facts", {}, {"text": "Alice is allergic to nuts.", "language": "en"}),
        ("DELETE", f"/api/v1/memory/alice/facts/{TEA}", {"reason": "no longer true"}, None),
        ("DELETE", f"/api/v1/memory/alice/facts/{BERLIN}", {}, None),
    ]


def test_wipe_needs_yes(memory: FakeMemory, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "wipe", "alice"]) == 2
    assert "add --yes" in capsys.readouterr().err
    assert memory.requests == []
    assert main(["memory", "wipe", "alice", "--yes"]) == 0
    assert "wiped the memory of 'alice'" in capsys.readouterr().out
    assert main(["memory", "wipe", "alice", "--yes"]) == 0
    assert "'alice' had no memory" in capsys.readouterr().out
    assert memory.writes() == [("DELETE", "/api/v1/memory/alice", {}, None)] * 2


def test_users_and_ids_are_quoted_as_one_path_segment() -> None:
    seen: list[bytes] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.raw_path)
        return httpx.Response(200, json=fact_row("x/y", "t", "2025-03-01T09:00:00Z"))

    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        MemoryApi(Endpoint("http://retrieval", RETRIEVAL_KEY), client).fact("a/b?c", "x/y")
    assert seen == [b"/api/v1/memory/a%2Fb%3Fc/facts/x%2Fy"]


def test_an_unreachable_service_is_named(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["memory", "show", "alice", "--url", closed]) == 1
    assert f"the retrieval service at {closed} did not answer" in capsys.readouterr().err


def test_an_editor_variable_that_is_no_command_is_reported(
    memory: FakeMemory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VISUAL", '"unbalanced')
    assert main(["memory", "edit", "alice", BERLIN]) == 1
    assert "cannot read $VISUAL" in capsys.readouterr().err
    assert memory.writes() == []


def test_timestamps_are_printed_as_the_service_wrote_them(
    memory: FakeMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    # The model reads a datetime; the person sees the service's own text, not a re-serialised one.
    memory.stored[BERLIN]["created_at"] = "2025-03-01T10:00:00.5+01:00"
    assert main(["memory", "show", "alice", BERLIN]) == 0
    assert "2025-03-01T10:00:00.5+01:00" in capsys.readouterr().out


def answering_anything(body: Any, status: int = 200) -> Starlette:
    async def answer(_: Request) -> JSONResponse:
        return JSONResponse(body, status_code=status)

    return Starlette(routes=[Route("/{path:path}", answer, methods=["GET", "POST", "PUT", "DELETE"])])


@pytest.mark.parametrize(
    ("argv", "body", "problem"),
    [
        (
            ["show", "alice"],
            {"user": "alice", "facts": [{"id": TEA, "text": "t"}]},
            "facts.0.created_at: Field required",
        ),
        (["show", "alice", "--json"], {"user": "alice"}, "facts: Field required"),
        (
            ["show", "alice", TEA],
            {**fact_row(TEA, "t", "2025-03-02T10:00:00Z"), "updated_at": "yesterday"},
            "updated_at: Input should be a valid datetime",
        ),
        (["log", "alice"], {"user": "alice", "commits": [{"sha": "a1b2"}]}, "commits.0.committed_at: Field required"),
        (["add", "alice", "Alice likes tea."], {"id": "new-fact"}, "text: Field required"),
        (["forget", "alice", TEA], {**fact_row(TEA, "t", "2025-03-02T10:00:00Z"), "file": None}, "file: Input should"),
        (["wipe", "alice", "--yes"], {"user": "alice"}, "wiped: Field required"),
    ],
    ids=["show", "show-json", "show-one", "log", "add", "forget", "wipe"],
)
def test_a_reply_that_is_not_the_apis_model_names_the_field(
    argv: list[str],
    body: dict[str, Any],
    problem: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    with serving(answering_anything(body)) as url:
        assert main(["memory", *argv, "--url", url]) == 1
    captured = capsys.readouterr()
    assert f"rag memory: unexpected reply ({problem}" in captured.err
    assert captured.out == ""


def test_an_error_body_that_is_not_the_services_is_quoted(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    with serving(answering_anything({"detail": "Not Found"}, status=404)) as url:
        assert main(["memory", "show", "alice", "--url", url]) == 1
    err = capsys.readouterr().err
    assert "rag memory: HTTP 404: {'detail': 'Not Found'}" in err
    assert "hint:" not in err
