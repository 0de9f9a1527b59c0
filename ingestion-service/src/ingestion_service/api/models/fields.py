"""Field checks the request models share: file names, S3 bucket names, tags."""

from __future__ import annotations

import ipaddress
import re

# Linux and Open WebUI's own storage cap names at 255 bytes; longer ones are not real uploads.
MAX_FILENAME_CHARS = 255
_CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")
# S3 general purpose bucket rules: 3-63 of [a-z0-9.-], starting and ending with a letter or digit.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_BUCKET_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_BUCKET_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
MAX_S3_KEY_BYTES = 1024
MAX_TAGS = 64
MAX_LABEL_CHARS = 128


def check_filename(value: str) -> str:
    """A file name, not a path: no control characters, no separators, at most 255 characters."""
    if len(value) > MAX_FILENAME_CHARS:
        raise ValueError(f"must be at most {MAX_FILENAME_CHARS} characters")
    if _CONTROL_CHARACTERS.search(value):
        raise ValueError("must not contain control characters (NUL, newline, ...)")
    if "/" in value or "\\" in value or value in (".", ".."):
        raise ValueError("must be a file name, not a path")
    return value


def check_bucket_name(value: str) -> str:
    """The S3 bucket naming rules, checked before any S3 call so a bad name is a 400, not a 502."""
    reason = None
    if not _BUCKET.match(value):
        reason = (
            "3-63 characters of lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit"
        )
    elif ".." in value:
        reason = "no two adjacent dots"
    elif value.startswith(_BUCKET_RESERVED_PREFIXES) or value.endswith(_BUCKET_RESERVED_SUFFIXES):
        reason = "no reserved prefix or suffix"
    else:
        try:
            ipaddress.IPv4Address(value)
            reason = "not formatted as an IP address"
        except ValueError:
            pass
    if reason is not None:
        raise ValueError(f"is not a valid S3 bucket name ({reason})")
    return value


def check_tags(values: list[str]) -> list[str]:
    """Tags stripped, without blanks or repeats, in the given order; each at most 128 characters."""
    tags: list[str] = []
    for value in values:
        tag = value.strip()
        if len(tag) > MAX_LABEL_CHARS:
            raise ValueError(f"each tag must be at most {MAX_LABEL_CHARS} characters")
        if tag and tag not in tags:
            tags.append(tag)
    return tags
