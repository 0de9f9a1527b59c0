"""One remembered fact as a Markdown file: YAML front matter, then the fact as the body.

```
---
id: 550e8400-e29b-41d4-a716-446655440000
role: memory
created_at: '2026-11-23T10:00:00Z'
updated_at: '2026-11-23T10:00:00Z'
conversation_id: default
source_message_id: null
language: en
---
The user prefers uv for Python package management.
```

People edit these files by hand, so reading is lenient where it can be (a file without front matter
is all body, its id the file's stem; a missing timestamp is the file's modification time) and strict
where it must be (the id in the front matter must be the file's stem, or the file is refused).
"""

from __future__ import annotations

import codecs
import hashlib
import re
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final

import frontmatter
import yaml
from frontmatter.default_handlers import YAMLHandler

from rag_runtime.lexical import FALLBACK_LANGUAGE
from shared_contract.names import COLLECTION_NAME_MAX_CHARS
from shared_contract.schema import MEMORY_COLLECTION_PREFIX

ROLE: Final = "memory"
FACT_SUFFIX: Final = ".md"
DELETED_DIR: Final = "deleted"

# A user names a folder and a tenant (memory-<user>), so it follows the tenant-name rule.
USER_MAX_CHARS: Final = COLLECTION_NAME_MAX_CHARS - len(MEMORY_COLLECTION_PREFIX)
USER_RULE: Final = f"must be 1-{USER_MAX_CHARS} characters, each an ASCII letter, digit, '_' or '-'"
_USER: Final = re.compile(rf"[A-Za-z0-9_-]{{1,{USER_MAX_CHARS}}}")
_LANGUAGE: Final = re.compile(r"[a-z]{2,3}")
_FACT_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
# Where a fact cut for a prompt may end: after a sentence, else at a space (not before half the room).
_SENTENCE_END: Final = re.compile(r"[.!?…](?=\s)|\n")
CLIPPED_MARKER: Final = " […]"


class _FactFileHandler(YAMLHandler):
    """python-frontmatter's YAML handler (safe loader and dumper) writing the files' own layout:
    the body right after the closing ``---`` and a final line break, as every fact file has them."""

    def format(self, post: frontmatter.Post, **kwargs: object) -> str:
        return f"---\n{self.export(post.metadata, **kwargs)}\n---\n{post.content}\n"


_HANDLER: Final = _FactFileHandler()


class FactFormatError(ValueError):
    """A fact file that cannot be read as a fact (bad YAML, an id that is not its file's stem)."""


def is_user(value: str) -> bool:
    """Whether ``value`` may name a memory user."""
    return _USER.fullmatch(value) is not None


def check_user(value: str) -> str:
    """``value`` unchanged, or ValueError stating the rule."""
    if not is_user(value):
        raise ValueError(f"user {USER_RULE}")
    return value


def is_fact_id(value: str) -> bool:
    """Whether ``value`` may name a fact (its file is ``<id>.md``): new facts get a UUID, a file made by
    hand may have any plain name."""
    return _FACT_ID.fullmatch(value) is not None


def new_fact_id() -> str:
    return str(uuid.uuid4())


def normalize_language(value: object) -> str:
    """A lower-case ISO 639 code, or ``any`` (indexed unstemmed) for anything else."""
    if isinstance(value, str) and _LANGUAGE.fullmatch(value.strip().lower()):
        return value.strip().lower()
    return FALLBACK_LANGUAGE


def utc_now() -> datetime:
    """Now, to the second: the files keep whole seconds, and a fact must equal its file read back."""
    return datetime.now(UTC).replace(microsecond=0)


def _timestamp(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(value: object, fallback: datetime) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if isinstance(value, str) and value.strip():
        try:
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return fallback
        return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    return fallback


def _optional_text(value: object) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


@dataclass(frozen=True, slots=True)
class Fact:
    """One fact as its file holds it. ``content_hash`` is the sha256 of the file's bytes: what the
    index compares to notice a hand edit (front matter included, so a new ``updated_at`` counts)."""

    id: str
    text: str
    created_at: datetime
    updated_at: datetime
    conversation_id: str | None = None
    source_message_id: str | None = None
    language: str = FALLBACK_LANGUAGE
    content_hash: str = ""
    # The file is longer than what was read (MAX_FACT_FILE_BYTES): ``text`` is its beginning.
    truncated: bool = False
    # Only on facts in deleted/: when and why they were removed.
    deleted_at: datetime | None = None
    deleted_reason: str | None = None

    @property
    def file_name(self) -> str:
        return f"{self.id}{FACT_SUFFIX}"

    def render(self) -> str:
        """The file's text."""
        front: dict[str, Any] = {
            "id": self.id,
            "role": ROLE,
            "created_at": _timestamp(self.created_at),
            "updated_at": _timestamp(self.updated_at),
            "conversation_id": self.conversation_id,
            "source_message_id": self.source_message_id,
            "language": self.language,
        }
        if self.deleted_at is not None:
            front["deleted_at"] = _timestamp(self.deleted_at)
            front["deleted_reason"] = self.deleted_reason
        return frontmatter.dumps(frontmatter.Post(self.text.strip(), **front), _HANDLER, sort_keys=False)

    def rendered(self) -> tuple[Fact, bytes]:
        """This fact with its ``content_hash`` set, and the bytes to write."""
        data = self.render().encode("utf-8")
        return replace(self, content_hash=hashlib.sha256(data).hexdigest()), data


def parse_fact(data: bytes, *, stem: str, modified: datetime, truncated: bool = False) -> Fact:
    """A fact file's bytes as a Fact; FactFormatError when it cannot be one. ``stem``: the file name
    without ``.md``; ``modified``: its modification time, for timestamps the file lacks; ``truncated``:
    ``data`` is only the file's beginning (it may end inside a character, which is dropped)."""
    try:
        # The incremental decoder keeps back a character cut by the read limit instead of failing on it.
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=not truncated)
    except UnicodeDecodeError as exc:
        raise FactFormatError(f"{stem}{FACT_SUFFIX} is not UTF-8") from exc
    front: dict[str, Any] = {}
    body = text
    # The handler's own steps, not frontmatter.loads: loads drops a front matter that is not a mapping
    # without a word, and would also take a TOML or JSON header.
    if _HANDLER.detect(text):
        try:
            header, body = _HANDLER.split(text)
        except ValueError:
            header = None  # an opening "---" never closed: all body, as a hand-written file
        if header is not None:
            try:
                loaded = _HANDLER.load(header) or {}
            except yaml.YAMLError as exc:
                raise FactFormatError(f"{stem}{FACT_SUFFIX}: the front matter is not valid YAML ({exc})") from exc
            if not isinstance(loaded, dict):
                raise FactFormatError(f"{stem}{FACT_SUFFIX}: the front matter is not a mapping")
            front = {str(key): value for key, value in loaded.items()}
    declared = front.get("id")
    if declared is not None and str(declared) != stem:
        raise FactFormatError(f"{stem}{FACT_SUFFIX}: its id {declared!r} is not its file name")
    fact_text = body.strip()
    if not fact_text:
        raise FactFormatError(f"{stem}{FACT_SUFFIX} holds no fact")
    created = _parse_time(front.get("created_at"), modified)
    return Fact(
        id=stem,
        text=fact_text,
        created_at=created,
        updated_at=_parse_time(front.get("updated_at"), modified),
        conversation_id=_optional_text(front.get("conversation_id")),
        source_message_id=_optional_text(front.get("source_message_id")),
        language=normalize_language(front.get("language")),
        content_hash=hashlib.sha256(data).hexdigest(),
        truncated=truncated,
        deleted_at=_parse_time(front["deleted_at"], modified) if front.get("deleted_at") else None,
        deleted_reason=_optional_text(front.get("deleted_reason")),
    )


def clip_for_prompt(text: str, max_chars: int) -> str:
    """``text`` when it fits in ``max_chars``, else its beginning cut after a sentence (or at a space)
    and marked with CLIPPED_MARKER, at most ``max_chars`` characters in all."""
    if len(text) <= max_chars:
        return text
    room = max(max_chars - len(CLIPPED_MARKER), 0)
    head = text[:room]
    ends = [match.end() for match in _SENTENCE_END.finditer(head) if match.end() >= room // 2]
    if ends:
        cut = ends[-1]
    else:
        space = head.rfind(" ")
        cut = space if space >= room // 2 else room
    return head[:cut].rstrip() + CLIPPED_MARKER
