"""The document attachments of an e-mail (kreuzberg lists an .eml's attachments but reads none).

Each attachment that is a document (not an image, audio, video or a nested message: in mail those
are mostly logos and signatures, and a scan would cost an OCR run) is handed back with a name
and its bytes; the converter reads each as a document of its own and adds its text after the
message, under ``### Attachment: <name>``. Pure stdlib (``email``), no engine import.
"""

from __future__ import annotations

import email
from collections.abc import Iterator
from dataclasses import dataclass
from email import policy
from email.message import EmailMessage, Message
from pathlib import Path

from ingestion_service.documents import _errors
from ingestion_service.documents.base import plain_suffix

# More than this many are left out (a mailing-list digest, an archive of forwards).
MAX_ATTACHMENTS = 20
# Attachments are read to this nesting level (the upload's own are level 1, those of a message
# attached to it level 2); deeper ones are named as skipped: common mail tools stop about here, and
# a chain of attached messages would otherwise be staged and parsed once per level without end.
MAX_ATTACHMENT_DEPTH = 3
# Named in a damaged message's error when the caller names no engine.
DEFAULT_ENGINE = "kreuzberg"
HEADING = "### Attachment: "
_SKIPPED_TYPES = ("image", "audio", "video", "message", "multipart")


@dataclass(frozen=True, slots=True)
class Attachment:
    """One attachment: the name it was sent under (or ``attachment-<n>``) and its decoded bytes."""

    name: str
    data: bytes

    @property
    def suffix(self) -> str:
        """The name's suffix when plain (engines pick their parser by it; the bytes still decide)."""
        return plain_suffix(self.name)


def document_attachments(path: Path, *, engine: str = DEFAULT_ENGINE) -> list[Attachment]:
    """The document attachments of the message at ``path``, in order, at most MAX_ATTACHMENTS.

    A message nested too deeply for the stdlib parser (it recurses once per ``message/rfc822`` or
    ``multipart`` level) is a damaged document (422); ``engine`` names the engine in the message.
    """
    try:
        message = email.message_from_bytes(path.read_bytes(), policy=policy.default)
    except RecursionError as exc:
        raise _errors.unparseable(engine, "the e-mail's parts are nested too deeply to read") from exc
    found: list[Attachment] = []
    for part in _parts(message):
        if not isinstance(part, EmailMessage) or not part.is_attachment():
            continue
        if part.get_content_maintype() in _SKIPPED_TYPES:
            continue
        data = part.get_payload(decode=True)
        if not isinstance(data, bytes) or not data.strip():
            continue
        name = " ".join((part.get_filename() or "").split()) or f"attachment-{len(found) + 1}"
        found.append(Attachment(name=name, data=data))
        if len(found) == MAX_ATTACHMENTS:
            break
    return found


def _parts(message: Message) -> Iterator[Message]:
    """Every part in ``Message.walk`` order, with a stack instead of its recursion."""
    stack: list[Message] = [message]
    while stack:
        part = stack.pop()
        yield part
        payload = part.get_payload()
        if part.is_multipart() and isinstance(payload, list):
            stack.extend(reversed([child for child in payload if isinstance(child, Message)]))


def section(name: str, text: str) -> str:
    """An attachment's text under its heading."""
    return f"{HEADING}{name}\n\n{text.strip()}"
