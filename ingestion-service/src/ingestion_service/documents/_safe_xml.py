"""XML parsing for document parts: the stdlib parser, refusing any DOCTYPE (entity expansion, external entities)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from xml.parsers import expat

# Feeding the prolog check in slices: it stops at the root element, so it reads little of a large part.
_CHECK_SLICE = 64 * 1024


class BadXmlError(ValueError):
    """The part is not well-formed XML, or declares a DOCTYPE (refused: entity expansion)."""


class _RootReached(Exception):
    """Internal: the prolog ended without a DOCTYPE."""


def _refuse_doctype(data: bytes) -> None:
    # Entities can only be declared in a DOCTYPE, which must precede the root element: a prolog
    # without one makes the document free of entity expansion and external references.
    checker = expat.ParserCreate()

    def on_doctype(*_args: object) -> None:
        raise BadXmlError("DOCTYPE declarations are refused (possible entity expansion)")

    def on_root(*_args: object) -> None:
        raise _RootReached

    checker.StartDoctypeDeclHandler = on_doctype
    checker.EntityDeclHandler = on_doctype
    checker.StartElementHandler = on_root
    try:
        for start in range(0, len(data), _CHECK_SLICE):
            checker.Parse(data[start : start + _CHECK_SLICE], False)
        checker.Parse(b"", True)
    except _RootReached:
        return
    except expat.ExpatError as exc:
        raise BadXmlError(f"not well-formed XML: {exc}") from exc


def parse_xml(data: bytes) -> ET.Element:
    """The root element of ``data``; BadXmlError when malformed or when it declares a DOCTYPE."""
    _refuse_doctype(data)
    try:
        return ET.fromstring(data)  # noqa: S314 - the prolog holds no DOCTYPE (checked above)
    except ET.ParseError as exc:
        raise BadXmlError(f"not well-formed XML: {exc}") from exc
