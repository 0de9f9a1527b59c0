"""Markup read as forgivingly as the engines read it: tags, attributes and text scanned from byte
chunks, with no well-formedness checks (a strict parser stops where the engines read on)."""

from __future__ import annotations

import codecs
import enum
import itertools
import re
import zipfile
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from ingestion_service.documents import plain_text
from ingestion_service.documents.structure_limits.common import CHUNK, HUGE, ZIP_DAMAGE


class Kind(enum.Enum):
    """What :func:`markup` found."""

    START = enum.auto()
    END = enum.auto()


ATTRS = rb"(?:[^>\"']++|\"[^\"]*+\"|'[^']*+')*+"  # ">" inside a quoted value does not end a tag
ANY_NAME = rb"[^\s/>!?<][^\s/>]*+"
_NAME = re.compile(rb"[^\s/>]*")
# What may follow a "<" that starts no markup ("a < b").
_NOT_MARKUP = frozenset({b" ", b"\t", b"\r", b"\n", b">", b"<"})


_PREFIX = rb"(?:[^\s/>:!?<]++:)?"
# Markup nobody reads, passed over inside the pattern (keeping Python out of the loop).
COMMENTS = (rb"<!--.*?-->", rb"<\?.*?\?>", rb"<!(?!--|\[CDATA\[)(?:[^\[>]++|\[[^\]]*+\])*+>")
SKIPPED_TEXT = (rb"<!\[CDATA\[.*?\]\]>", rb"[^<]++")
_ENDS = (rb"(?P<lone><)", rb"(?P<stop>\Z)")


def named_group(names: tuple[bytes, ...]) -> bytes:
    return _PREFIX + rb"(?:" + b"|".join(re.escape(name) for name in names) + rb")(?=[\s/>])"


def markup_pattern(skip: Iterable[bytes], report: Iterable[bytes]) -> re.Pattern[bytes]:
    """From where the last match ended: the markup in ``skip``, then one construct of ``report``, a
    "<" that starts no markup (lone), or the end (stop)."""
    return re.compile(b"(?:" + b"|".join(skip) + b")*+(?:" + b"|".join((*report, *_ENDS)) + b")", re.DOTALL)


def scanner(tags: tuple[bytes, ...] | None) -> re.Pattern[bytes]:
    """Reports start and end tags with a local name in ``tags`` (None: every tag), constructs
    delimited as quick-xml (the engines' reader) delimits them."""
    if tags is None:
        skip = [*COMMENTS, *SKIPPED_TEXT]
        report = [rb"<(?P<start>" + ANY_NAME + rb")" + ATTRS + b">", rb"</(?P<end>[^\s/>]*+)[^>]*+>"]
    else:
        skip = [
            *COMMENTS,
            *SKIPPED_TEXT,
            rb"<(?!" + named_group(tags) + rb")" + ANY_NAME + ATTRS + b">",
            rb"</(?!" + named_group(tags) + rb")[^>]*+>",
        ]
        report = [
            rb"<(?P<start>" + named_group(tags) + rb")" + ATTRS + b">",
            rb"</(?P<end>" + named_group(tags) + rb")[^>]*+>",
        ]
    return markup_pattern(skip, report)


def matches(chunks: Iterable[bytes], pattern: re.Pattern[bytes]) -> Iterator[re.Match[bytes]]:
    """The constructs ``pattern`` (:func:`markup_pattern`) reports in a byte stream read in chunks.

    Read as the engines' reader (quick-xml) reads: no well-formedness checks, ``>`` inside a quoted
    attribute value does not end a tag, comments, processing instructions and declarations skipped.
    A construct cut off by the end of the stream is dropped. Linear in the input, however long one
    construct is.
    """
    parts: list[bytes] = []
    size = wait_for = 0
    for chunk in itertools.chain(chunks, (b"",)):
        end_of_stream = not chunk
        parts.append(chunk)
        size += len(chunk)
        if size < wait_for and not end_of_stream:
            continue
        buf = b"".join(parts)
        # Constructs end at a ">": what follows the last one waits for the next chunk.
        stop = len(buf) if end_of_stream else buf.rfind(b">") + 1
        pos = stop
        for match in pattern.finditer(buf, 0, stop):
            kind = match.lastgroup
            if kind == "stop":
                break
            if kind != "lone":
                yield match
            elif not end_of_stream and buf[match.end() : match.end() + 1] not in _NOT_MARKUP:
                pos = match.start()  # a construct whose end is still to come
                break
        rest = buf[pos:]
        parts, size = [rest], len(rest)
        # A long unfinished construct is retried once the buffer has doubled, not on every chunk.
        wait_for = 2 * size if size > CHUNK else 0


def scan_markup(chunks: Iterable[bytes], pattern: re.Pattern[bytes]) -> Iterator[tuple[Kind, bytes, bytes]]:
    """(kind, local name, the tag from its name on) of what ``pattern`` (:func:`scanner`) reports; a
    self-closing tag is a START then an END."""
    for match in matches(chunks, pattern):
        kind = match.lastgroup
        if kind == "start":
            local = local_name(match["start"])
            tag = match.string[match.start("start") : match.end() - 1]
            yield Kind.START, local, tag
            if tag.rstrip().endswith(b"/"):
                yield Kind.END, local, b""
        elif kind == "end":
            yield Kind.END, local_name(match["end"]), b""


EVERY_TAG = scanner(None)


def local_name(name: bytes) -> bytes:
    return name.rpartition(b":")[2]


_ATTRIBUTE = re.compile(rb"([^\s=/>\"']+)\s*=\s*(?:\"([^\"]*)\"|'([^']*)')")


def tag_attributes(tag: bytes) -> Iterator[tuple[bytes, bytes]]:
    """A start tag's (qualified name, value) pairs, in order; read one after the other, so a value
    holding ``name="..."`` is no attribute."""
    name = _NAME.match(tag)
    for match in _ATTRIBUTE.finditer(tag, name.end() if name else 0):
        yield match[1], match[2] if match[2] is not None else match[3]


def first_attribute(tag: bytes, name: bytes) -> bytes | None:
    """The first value of the attribute named exactly ``name`` (calamine's get_attribute takes the first)."""
    return next((value for key, value in tag_attributes(tag) if key == name), None)


def largest_count(attributes: Iterable[tuple[bytes, bytes]], local: bytes) -> int:
    """The largest repeat count among attributes whose local name is ``local`` (any prefix), else 1."""
    return max((count_value(value) for key, value in attributes if local_name(key) == local), default=1)


def count_value(value: bytes | None) -> int:
    """A repeat count: a positive integer (a leading "+" allowed, as the engine parses it), else 1."""
    digits = (value or b"").strip().removeprefix(b"+")
    if not digits.isdigit():
        return 1
    digits = digits.lstrip(b"0")
    if len(digits) > 12:
        return HUGE
    return max(int(digits or b"0"), 1)


def member_chunks(archive: zipfile.ZipFile, name: str) -> Iterator[bytes]:
    try:
        with archive.open(name) as member:
            while piece := member.read(CHUNK):
                yield piece
    except ZIP_DAMAGE:
        return  # the engine reports the damage


def file_chunks(handle: BinaryIO) -> Iterator[bytes]:
    while piece := handle.read(CHUNK):
        yield piece


def xml_chunks(handle: BinaryIO) -> Iterator[bytes]:
    """The file's bytes, UTF-16/32 XML (which a byte scan would misread) re-encoded as UTF-8."""
    head = handle.read(4)
    handle.seek(0)
    encoding = plain_text.bom_encoding(head)
    if encoding is None and head[:2] in (b"<\x00", b"\x00<"):
        encoding = "utf-16-le" if head[0] == ord("<") else "utf-16-be"
    if encoding is None:
        yield from file_chunks(handle)
        return
    decoder = codecs.getincrementaldecoder(encoding)("replace")
    for piece in file_chunks(handle):
        yield decoder.decode(piece).encode("utf-8")
    yield decoder.decode(b"", final=True).encode("utf-8")
