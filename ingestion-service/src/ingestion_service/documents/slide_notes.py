"""A PPTX deck's speaker notes, slide by slide: kreuzberg reads the slides and leaves the notes out.

The notes of a slide are the body placeholder of the notes part its relationships name; slides are
numbered in the deck's order (``ppt/presentation.xml``'s slide list), 0-based like the page of a
slide's chunks.
"""

from __future__ import annotations

import posixpath
import zipfile
from pathlib import Path
from xml.etree.ElementTree import Element

from ingestion_service.documents.office_extras import (
    ZIP_DAMAGE,
    OfficeExtrasError,
    paragraph_text,
    read_part,
)

NOTES_HEADING = "### Notes"
_PRESENTATION = "ppt/presentation.xml"
_SLIDE_TYPE = "/relationships/slide"
_NOTES_TYPE = "/relationships/notesSlide"


def speaker_notes(path: Path) -> dict[int, str]:
    """``{slide index: notes text}`` for the slides that have notes; {} for a file that is no PPTX.

    Raises :class:`OfficeExtrasError` when the archive or one of the parts read is damaged.
    """
    with path.open("rb") as handle:
        try:
            archive = zipfile.ZipFile(handle)
        except ZIP_DAMAGE as exc:
            raise OfficeExtrasError(f"not a readable ZIP archive: {exc}") from exc
        with archive:
            names = set(archive.namelist())
            if _PRESENTATION not in names:
                return {}
            notes: dict[int, str] = {}
            for index, slide in enumerate(_slides_in_order(archive, names)):
                part = _target(archive, names, slide, _NOTES_TYPE)
                root = read_part(archive, part) if part is not None else None
                text = _notes_text(root) if root is not None else ""
                if text:
                    notes[index] = text
            return notes


def _slides_in_order(archive: zipfile.ZipFile, names: set[str]) -> list[str]:
    presentation = read_part(archive, _PRESENTATION)
    relations = _relations(archive, names, _PRESENTATION)
    if presentation is None:
        return []
    slides: list[str] = []
    for slide_id in presentation.iter("sldId"):
        # r:id (namespaced), not the slide's own numeric id.
        relation = next((value for key, value in slide_id.attrib.items() if key.endswith("}id")), None)
        target = relations.get(relation or "")
        if target is not None and target[0].endswith(_SLIDE_TYPE) and target[1] in names:
            slides.append(target[1])
    return slides


def _relations(archive: zipfile.ZipFile, names: set[str], part: str) -> dict[str, tuple[str, str]]:
    """``{relationship id: (type, part name)}`` of ``part``, targets resolved against its folder."""
    folder, file_name = posixpath.split(part)
    rels_name = posixpath.join(folder, "_rels", f"{file_name}.rels")
    if rels_name not in names:
        return {}
    root = read_part(archive, rels_name)
    if root is None:
        return {}
    relations: dict[str, tuple[str, str]] = {}
    for relation in root.iter("Relationship"):
        target = relation.get("Target") or ""
        resolved = posixpath.normpath(posixpath.join(folder, target)).lstrip("/")
        relations[relation.get("Id") or ""] = (relation.get("Type") or "", resolved)
    return relations


def _target(archive: zipfile.ZipFile, names: set[str], part: str, kind: str) -> str | None:
    for relation_type, target in _relations(archive, names, part).values():
        if relation_type.endswith(kind) and target in names:
            return target
    return None


def _notes_text(notes: Element) -> str:
    """The text of the notes' body placeholder (not the slide image, number or header)."""
    paragraphs: list[str] = []
    for shape in notes.iter("sp"):
        placeholder = next(shape.iter("ph"), None)
        if placeholder is None or placeholder.get("type") != "body":
            continue
        body = shape.find("txBody")
        if body is None:
            continue
        paragraphs.extend(text for paragraph in body.iter("p") if (text := paragraph_text(paragraph).strip()))
    return "\n\n".join(paragraphs)
