"""Markdown front matter (YAML between ``---``, TOML between ``+++``) read into document labels.

An engine would index the block as body text (kreuzberg renders it as ``**tags**: Sequence [...]``),
so the block is cut off before any engine runs and mapped onto the keys filters read: ``tags``,
``category`` (from ``category``, else ``type``), the document ``title``, and ``attributes``
(``aliases``, ``date``/``created``/``updated`` as ISO text, and every other scalar key). A block
that cannot be read stays in the text, with a warning: the file is still indexed.
"""

from __future__ import annotations

import logging
import re
import tomllib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, time
from pathlib import Path
from typing import Any, Final

import yaml
from frontmatter.default_handlers import BaseHandler, YAMLHandler
from haystack import Document

from ingestion_service.documents import plain_text
from ingestion_service.documents.base import SourceFile
from shared_contract.attributes import (
    ATTRIBUTE_KEY_PATTERN,
    MAX_ATTRIBUTE_CHARS,
    MAX_ATTRIBUTE_VALUES,
    MAX_ATTRIBUTES,
    AttributeScalar,
    AttributeType,
    AttributeValue,
    check_attributes,
)

logger = logging.getLogger(__name__)

MARKDOWN_SUFFIXES: Final = frozenset({".md", ".markdown", ".mdx"})
# Extractor metadata on every Document of a file with front matter: the labels it gave (tags,
# category, attributes; absent keys were not set). The runner publishes them below the request's.
FRONT_MATTER_KEY: Final = "front_matter"
# Why a front matter block was left in the text.
FRONT_MATTER_ERROR_KEY: Final = "front_matter_error"
# A closing delimiter further in is not looked for: the block is then not front matter.
MAX_FRONT_MATTER_CHARS: Final = 64 * 1024
# The limits of the request's own fields (api.models.fields), which the front matter's labels keep too.
MAX_TAGS: Final = 64
MAX_LABEL_CHARS: Final = 128

_TAG_KEYS = ("tags", "tag")
_CATEGORY_KEYS = ("category", "type")
_ALIAS_KEYS = ("aliases", "alias")
_TITLE_KEY = "title"
_WIKI_LINK = re.compile(r"^\[\[([^\]|]+)(?:\|[^\]]*)?\]\]$")
# Property names people write with hyphens or spaces ("due-date") become attribute keys ("due_date").
_KEY_SEPARATORS = re.compile(r"[\s-]+")
_ATTRIBUTE_KEY = re.compile(ATTRIBUTE_KEY_PATTERN)


class FrontMatterError(ValueError):
    """A front matter block that is not a readable mapping (the message says why)."""


class _TomlHandler(BaseHandler):
    """python-frontmatter's boundaries for ``+++`` blocks, parsed with the stdlib's TOML reader."""

    FM_BOUNDARY = re.compile(r"^\+{3,}\s*$", re.MULTILINE)
    START_DELIMITER = END_DELIMITER = "+++"

    def load(self, fm: str, **kwargs: object) -> Any:  # noqa: ARG002 - the handler's signature
        return tomllib.loads(fm)


_HANDLERS: Final = (("YAML", YAMLHandler()), ("TOML", _TomlHandler()))


@dataclass(frozen=True)
class FrontMatter:
    """What a front matter block sets; None (or no attribute) where it says nothing."""

    title: str | None = None
    tags: list[str] | None = None
    category: str | None = None
    attributes: dict[str, AttributeValue] = field(default_factory=dict)

    def labels(self) -> dict[str, Any]:
        """The labels as FRONT_MATTER_KEY stores them (only those set)."""
        labels: dict[str, Any] = {}
        if self.tags is not None:
            labels["tags"] = self.tags
        if self.category is not None:
            labels["category"] = self.category
        if self.attributes:
            labels["attributes"] = self.attributes
        return labels


def split_front_matter(text: str) -> tuple[dict[str, Any], str] | None:
    """``text``'s front matter fields and the text after the block; None when it starts with none.

    FrontMatterError when the block is there but is not a YAML or TOML mapping.
    """
    head = text[:MAX_FRONT_MATTER_CHARS]
    for language, handler in _HANDLERS:
        if not handler.detect(head):
            continue
        try:
            block, rest = handler.split(head)
        except ValueError:
            return None  # no closing delimiter near the start: a thematic break, not front matter
        try:
            loaded = handler.load(block)
        except (yaml.YAMLError, tomllib.TOMLDecodeError, ValueError, RecursionError) as exc:
            # ValueError: a YAML date that is no date (2024-13-01); RecursionError: absurd nesting.
            raise FrontMatterError(f"{language} front matter could not be read: {_reason(exc)}") from exc
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise FrontMatterError(f"{language} front matter is not a mapping of keys to values")
        fields = {key: value for key, value in loaded.items() if isinstance(key, str)}
        return fields, (rest + text[len(head) :]).lstrip("\r\n")
    return None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        return f"{exc.problem or 'invalid YAML'} (line {exc.problem_mark.line + 1})"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _text(value: object, max_chars: int) -> str | None:
    """A scalar as stripped text (a wiki link ``[[Note]]`` as its target), None when empty or too long."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    text = str(value).strip()
    link = _WIKI_LINK.match(text)
    if link is not None:
        text = link.group(1).strip()
    return text if text and len(text) <= max_chars else None


def _items(value: object) -> list[object]:
    """A list as its items; a string as its comma-separated parts."""
    if isinstance(value, list):
        return list(value)
    if isinstance(value, str):
        return list(value.split(","))
    return [value]


def _tags(value: object) -> list[str]:
    """Tags from a list or a comma- or space-separated string; Obsidian's ``#tag`` written ``tag``."""
    if isinstance(value, str) and "," not in value:
        value = value.split()
    tags: list[str] = []
    for item in _items(value):
        text = _text(item, MAX_ATTRIBUTE_CHARS)
        tag = None if text is None else text.lstrip("#").strip()
        if tag and len(tag) <= MAX_LABEL_CHARS and tag not in tags:
            tags.append(tag)
    return tags[:MAX_TAGS]


def _category(value: object) -> str | None:
    items = value if isinstance(value, list) else [value]
    return next((text for item in items if (text := _text(item, MAX_LABEL_CHARS)) is not None), None)


def _scalar(value: object) -> object:
    """A value as an attribute holds it: dates and times as ISO 8601 text."""
    if isinstance(value, date | datetime | time):
        return value.isoformat()
    if isinstance(value, str):
        return value.strip()
    return value


def _attribute(value: object) -> AttributeValue | None:
    """A scalar or a list of scalars as an attribute value; None for anything else (nested data)."""
    candidate: object
    if isinstance(value, list):
        candidate = [_scalar(item) for item in value if item is not None][:MAX_ATTRIBUTE_VALUES]
    else:
        candidate = _scalar(value)
    if candidate is None or candidate == "" or candidate == []:
        return None
    try:
        # The contract's own rules for attributes: scalars only, text of at most MAX_ATTRIBUTE_CHARS.
        return check_attributes({"value": candidate}, {})["value"]
    except ValueError:
        return None


def front_matter_from(fields: Mapping[str, Any]) -> FrontMatter:
    """The labels ``fields`` (a parsed block) set; keys are matched without regard to case."""
    by_name = {key.strip().lower(): key for key in reversed(list(fields))}
    used: set[str] = set()

    def first(names: tuple[str, ...]) -> tuple[str | None, object]:
        for name in names:
            key = by_name.get(name)
            if key is not None and fields[key] is not None:
                used.add(key)
                return key, fields[key]
        return None, None

    tag_key, tag_value = first(_TAG_KEYS)
    category_key, category_value = first(_CATEGORY_KEYS)
    title_key, title_value = first((_TITLE_KEY,))
    alias_key, alias_value = first(_ALIAS_KEYS)
    attributes: dict[str, AttributeValue] = {}
    if alias_key is not None:
        aliases: list[AttributeScalar] = [
            text for item in _items(alias_value) if (text := _text(item, MAX_ATTRIBUTE_CHARS)) is not None
        ]
        if aliases:
            attributes["aliases"] = aliases[:MAX_ATTRIBUTE_VALUES]
    for key, value in fields.items():
        if key in used or len(attributes) >= MAX_ATTRIBUTES:
            continue
        name = _KEY_SEPARATORS.sub("_", key.strip())
        if name in attributes or not _ATTRIBUTE_KEY.match(name):
            continue  # not a key attributes can hold: left out, as nested values are
        converted = _attribute(value)
        if converted is not None:
            attributes[name] = converted
    return FrontMatter(
        title=None if title_key is None else _text(title_value, MAX_ATTRIBUTE_CHARS),
        tags=None if tag_key is None else _tags(tag_value),
        category=None if category_key is None else _category(category_value),
        attributes=attributes,
    )


@dataclass(frozen=True)
class FrontMatterReading:
    """A Markdown file's front matter, and the file engines should read in its place."""

    source: SourceFile
    front_matter: FrontMatter | None = None
    error: str | None = None

    def apply(self, documents: list[Document]) -> list[Document]:
        """The engine's Documents with the front matter's title and labels (or why it stayed text)."""
        extra: dict[str, Any]
        if self.error is not None:
            extra = {FRONT_MATTER_ERROR_KEY: self.error}
        elif self.front_matter is not None:
            extra = {FRONT_MATTER_KEY: self.front_matter.labels()}
            if self.front_matter.title is not None:
                extra["title"] = self.front_matter.title
        else:
            return documents
        return [Document(content=document.content, meta={**document.meta, **extra}) for document in documents]


def is_markdown(source: SourceFile) -> bool:
    """Whether the file is Markdown by its name or as staged (engines read front matter from no other)."""
    return Path(source.filename).suffix.lower() in MARKDOWN_SUFFIXES or source.path.suffix.lower() in MARKDOWN_SUFFIXES


@contextmanager
def without_front_matter(source: SourceFile) -> Iterator[FrontMatterReading]:
    """``source`` for the engine: a Markdown file's text after its front matter, in a sibling file
    removed on exit; the file itself when it has none or it cannot be read (blocking)."""
    if not is_markdown(source):
        yield FrontMatterReading(source)
        return
    text = plain_text.decode(source.path.read_bytes())
    try:
        split = split_front_matter(text)
    except FrontMatterError as exc:
        logger.warning("front matter left in the text: %s", exc, extra={"file_name": source.filename})
        yield FrontMatterReading(source, error=str(exc))
        return
    if split is None:
        yield FrontMatterReading(source)
        return
    fields, body = split
    body_path = source.path.with_name(f"{source.path.stem}.body{source.path.suffix}")
    body_path.write_text(body, encoding="utf-8")
    try:
        yield FrontMatterReading(
            SourceFile(path=body_path, filename=source.filename, media_type=source.media_type),
            front_matter=front_matter_from(fields),
        )
    finally:
        body_path.unlink(missing_ok=True)


def typed_labels(labels: Mapping[str, Any], declared: Mapping[str, AttributeType]) -> dict[str, Any]:
    """FRONT_MATTER_KEY's labels with the attributes INDEXED_ATTRIBUTES types differently left out
    (a request with them is refused; a note's front matter only loses the key, with a warning)."""
    attributes = labels.get("attributes")
    if not isinstance(attributes, dict):
        return dict(labels)
    kept: dict[str, AttributeValue] = {}
    for key, value in attributes.items():
        try:
            kept |= check_attributes({key: value}, declared)
        except ValueError as exc:
            logger.warning("front matter attribute left out: %s", exc)
    return {**labels, "attributes": kept}
