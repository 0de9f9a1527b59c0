"""The DOCX package reader: native text, shape labels and detector signals on real and built packages."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from ingestion_service.documents import docx_package
from ingestion_service.documents.docx_package import (
    MAX_DEPTH,
    DiagramSignals,
    diagram_signals,
    is_docx,
    labels,
    read_native_text,
    restore_dropped_paragraphs,
)
from ingestion_service.errors import CORRUPT_REASON, UNSUPPORTED_REASON, DocumentTooLargeError, ExtractionError

TEXTBOX = "docx/docling__textbox.docx"  # a flowchart of 16 text boxes and 11 connectors
TABLES = "docx/docling__word_tables.docx"
PICTURES = "docx/unstructured__contains-pictures.docx"  # 5 body pictures, one more in a header
ANCHORS = "docx/kreuzberg__word_image_anchors.docx"  # 3 small floating pictures
TEXT_BOX_IN_HEADER = "docx/tika__testWORD_text_box.docx"  # one text box in the body, one in the header

MIN_IMAGE_EMU = 1_500_000_000_000  # EXTRACTION_ROUTER_MIN_IMAGE_EMU's default


def _vector(signals: DiagramSignals) -> bool:
    """The vector signal at the default thresholds."""
    return signals.vector_flowchart(min_textboxes=20, min_ratio=2.0)


def _raster(signals: DiagramSignals, min_image_word_ratio: float = 0.0) -> bool:
    """The raster signal at the default thresholds."""
    return signals.raster_figure(min_images=1, min_image_emu=MIN_IMAGE_EMU, min_image_word_ratio=min_image_word_ratio)


W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
NAMESPACES = (
    f'xmlns:w="{W}" '
    'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" '
    'xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing" '
    'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
    'xmlns:pic="http://schemas.openxmlformats.org/drawingml/2006/picture" '
    'xmlns:wpg="http://schemas.microsoft.com/office/word/2010/wordprocessingGroup" '
    'xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" '
    'xmlns:v="urn:schemas-microsoft-com:vml"'
)


def _docx(tmp_path: Path, body: str, *, styles: str | None = None, prolog: str = "") -> Path:
    """A minimal package whose document.xml holds ``body``."""
    path = tmp_path / "built.docx"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(
            "word/document.xml",
            f'<?xml version="1.0" encoding="UTF-8"?>{prolog}<w:document {NAMESPACES}><w:body>{body}</w:body></w:document>',
        )
        if styles is not None:
            archive.writestr("word/styles.xml", f'<w:styles xmlns:w="{W}">{styles}</w:styles>')
    return path


def _para(text: str) -> str:
    return f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p>"


def _text_box(text: str) -> str:
    shape = f"<wps:wsp><wps:txbx><w:txbxContent>{_para(text)}</w:txbxContent></wps:txbx></wps:wsp>"
    return (
        '<w:p><w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><wp:anchor>'
        '<wp:extent cx="100" cy="100"/><a:graphic><a:graphicData>'
        f"{shape}</a:graphicData></a:graphic></wp:anchor></w:drawing></mc:Choice>"
        f"<mc:Fallback><w:pict><v:shape><v:textbox><w:txbxContent>{_para(text)}</w:txbxContent>"
        "</v:textbox></v:shape></w:pict></mc:Fallback></mc:AlternateContent></w:r></w:p>"
    )


def _picture(cx: int, cy: int, *, link: str = 'r:embed="rId1"') -> str:
    return (
        f'<w:p><w:r><w:drawing><wp:inline><wp:extent cx="{cx}" cy="{cy}"/><a:graphic><a:graphicData>'
        f"<pic:pic><pic:blipFill><a:blip {link}/></pic:blipFill></pic:pic>"
        "</a:graphicData></a:graphic></wp:inline></w:drawing></w:r></w:p>"
    )


def test_textbox_flowchart_fires_the_vector_signal(docs: Path) -> None:
    signals = diagram_signals(docs / TEXTBOX)
    assert signals.textboxes == 27  # 16 text boxes + 11 connector lines, each counted once
    assert signals.drawing_words > 2 * signals.body_words > 0
    assert _vector(signals)
    assert not _raster(signals)


def test_tables_document_fires_no_signal(docs: Path) -> None:
    signals = diagram_signals(docs / TABLES)
    assert (signals.textboxes, signals.drawing_words, signals.body_images) == (0, 0, 0)
    assert signals.body_words > 100
    assert not _vector(signals)
    assert not _raster(signals)


def test_large_body_picture_fires_the_raster_signal_and_header_pictures_do_not_count(docs: Path) -> None:
    signals = diagram_signals(docs / PICTURES)
    assert signals.body_images == 5  # the sixth picture sits in header2.xml
    assert signals.largest_image_emu >= MIN_IMAGE_EMU
    assert _raster(signals)
    assert not _vector(signals)


def test_small_pictures_stay_below_the_area_floor(docs: Path) -> None:
    signals = diagram_signals(docs / ANCHORS)
    assert signals.body_images == 3
    assert 0 < signals.largest_image_emu < MIN_IMAGE_EMU
    assert not _raster(signals)
    assert signals.raster_figure(min_images=1, min_image_emu=signals.largest_image_emu)


def test_image_word_ratio_guard_needs_few_words_per_picture_area(docs: Path) -> None:
    signals = diagram_signals(docs / PICTURES)
    ratio = signals.largest_image_emu / signals.body_words
    assert signals.image_word_ratio == ratio
    assert _raster(signals, ratio)
    assert not _raster(signals, ratio * 1.01)


def test_signals_never_fire_without_shapes_or_pictures_even_at_zero_thresholds() -> None:
    empty = DiagramSignals(textboxes=0, drawing_words=0, body_words=10, body_images=0, largest_image_emu=0)
    assert not empty.vector_flowchart(min_textboxes=0, min_ratio=0.0)
    assert not empty.raster_figure(min_images=0, min_image_emu=0)


def test_labels_are_verbatim_once_per_shape_in_document_order(docs: Path) -> None:
    found = labels(docs / TEXTBOX)
    assert len(found) == 16  # the Choice branch only: the VML Fallback copies are not read
    assert found[0] == "Student falls ill"  # typed across two runs ("Student falls il" + "l")
    assert "Whether the epidemic has eased." in found
    assert found.count("Yes") == 3


def test_header_text_boxes_are_not_labels(docs: Path) -> None:
    assert labels(docs / TEXT_BOX_IN_HEADER) == ["This text is inside of a text box in the body of the document."]


def test_native_text_keeps_body_order_and_each_text_box_once(docs: Path) -> None:
    text = read_native_text(docs / TEXTBOX)
    assert text.startswith("Chiayi County Shuishang Township Nanjing Elementary School Affiliated Kindergarten")
    assert text.count("Student falls ill") == 1
    assert text.index("Infectious Disease Reporting Procedure") < text.index("Student falls ill")
    assert text.index("Student falls ill") < text.index("Case closed.")


def test_native_text_renders_tables_as_markdown(docs: Path) -> None:
    text = read_native_text(docs / TABLES)
    table_lines = [line for line in text.splitlines() if line.startswith("|")]
    assert table_lines
    assert any(set(line.replace("|", "").split()) == {"---"} for line in table_lines)


def test_native_text_headings_lists_and_inline_shapes(tmp_path: Path) -> None:
    styles = (
        '<w:style w:type="paragraph" w:styleId="Overskrift1"><w:name w:val="heading 1"/></w:style>'
        '<w:style w:type="paragraph" w:styleId="Listeafsnit"><w:name w:val="List Paragraph"/></w:style>'
    )
    body = (
        '<w:p><w:pPr><w:pStyle w:val="Overskrift1"/></w:pPr><w:r><w:t>Proces</w:t></w:r></w:p>'
        '<w:p><w:pPr><w:numPr><w:ilvl w:val="1"/><w:numId w:val="3"/></w:numPr></w:pPr>'
        "<w:r><w:t>Trin</w:t></w:r></w:p>" + _text_box("Godkend") + "<w:sectPr/>"
    )
    text = read_native_text(_docx(tmp_path, body, styles=styles))
    assert text == "# Proces\n\n  - Trin\n\nGodkend"


def test_linked_pictures_are_not_body_images(tmp_path: Path) -> None:
    body = _picture(2_000_000, 2_000_000, link='r:link="rId9"') + _picture(1_000_000, 1_000_000)
    signals = diagram_signals(_docx(tmp_path, body))
    assert signals.body_images == 1
    assert signals.largest_image_emu == 1_000_000 * 1_000_000


def test_grouped_picture_area_is_scaled_to_the_group_extent(tmp_path: Path) -> None:
    # The group is drawn at half its child coordinates: a 2,000,000-EMU child shows as 1,000,000.
    group = (
        '<wpg:wgp><wpg:grpSpPr><a:xfrm><a:ext cx="1000000" cy="1000000"/><a:chExt cx="2000000" cy="2000000"/>'
        "</a:xfrm></wpg:grpSpPr>"
        '<pic:pic><pic:blipFill><a:blip r:embed="rId1"/></pic:blipFill>'
        '<pic:spPr><a:xfrm><a:ext cx="2000000" cy="2000000"/></a:xfrm></pic:spPr></pic:pic></wpg:wgp>'
    )
    body = (
        '<w:p><w:r><w:drawing><wp:anchor><wp:extent cx="1000000" cy="1000000"/><a:graphic><a:graphicData>'
        f"{group}</a:graphicData></a:graphic></wp:anchor></w:drawing></w:r></w:p>"
    )
    signals = diagram_signals(_docx(tmp_path, body))
    assert (signals.body_images, signals.largest_image_emu) == (1, 1_000_000 * 1_000_000)


def test_vml_picture_size_comes_from_its_style(tmp_path: Path) -> None:
    body = (
        '<w:p><w:r><w:pict><v:shape style="width:100pt;height:50pt"><v:imagedata r:id="rId1"/></v:shape>'
        '<v:rect style="width:10pt;height:10pt"/></w:pict></w:r></w:p>'
    )
    signals = diagram_signals(_docx(tmp_path, body))
    assert signals.body_images == 1
    assert signals.largest_image_emu == (100 * 12_700) * (50 * 12_700)
    assert signals.textboxes == 1  # the rectangle is a shape, the picture is not


def test_alternate_content_counts_the_choice_branch_only(tmp_path: Path) -> None:
    signals = diagram_signals(_docx(tmp_path, _para("one two") + _text_box("three four five")))
    assert (signals.textboxes, signals.drawing_words, signals.body_words) == (1, 3, 2)


def test_doctype_is_refused(tmp_path: Path) -> None:
    prolog = '<!DOCTYPE w:document [<!ENTITY boom "boom">]>'
    path = _docx(tmp_path, _para("&boom;"), prolog=prolog)
    with pytest.raises(ExtractionError) as caught:
        read_native_text(path)
    assert caught.value.document_problem
    assert caught.value.reason == CORRUPT_REASON
    assert "DTD" in str(caught.value)


def test_malformed_xml_is_a_document_problem(tmp_path: Path) -> None:
    path = tmp_path / "broken.docx"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("word/document.xml", "<w:document><w:body>")
    with pytest.raises(ExtractionError) as caught:
        diagram_signals(path)
    assert caught.value.reason == CORRUPT_REASON


def test_absurd_nesting_is_refused(tmp_path: Path) -> None:
    nested = "<w:sdt><w:sdtContent>" * (MAX_DEPTH // 2) + _para("deep") + "</w:sdtContent></w:sdt>" * (MAX_DEPTH // 2)
    with pytest.raises(ExtractionError) as caught:
        read_native_text(_docx(tmp_path, nested))
    assert caught.value.reason == CORRUPT_REASON
    assert f"deeper than {MAX_DEPTH}" in str(caught.value)


def test_part_above_the_parse_limit_is_too_large(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _docx(tmp_path, _para("word " * 400))
    monkeypatch.setattr(docx_package, "MAX_PART_BYTES", 1024)
    with pytest.raises(DocumentTooLargeError, match=r"word/document\.xml"):
        diagram_signals(path)


def test_zip_without_document_part_is_unsupported(tmp_path: Path) -> None:
    path = tmp_path / "other.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("xl/workbook.xml", "<workbook/>")
    assert not is_docx(path)
    with pytest.raises(ExtractionError) as caught:
        labels(path)
    assert caught.value.reason == UNSUPPORTED_REASON


def test_is_docx_decides_by_content(docs: Path, tmp_path: Path) -> None:
    renamed = tmp_path / "upload.bin"
    renamed.write_bytes((docs / TABLES).read_bytes())
    assert is_docx(renamed)
    assert not is_docx(docs / "pdf/kreuzberg__searchable.pdf")


def test_left_out_paragraphs_are_put_back_after_the_paragraph_before_them(docs: Path) -> None:
    native = read_native_text(docs / TABLES).split("\n\n")
    prose = [index for index, block in enumerate(native) if not block.startswith("|") and len(block.split()) >= 3]
    dropped = prose[1]
    # The reading: every block but one paragraph, with an escape and curly quotes where the package has none.
    reading = [block.replace(".", "\\.").replace('"', "\u201c") for block in native]
    del reading[dropped]
    restored, count = restore_dropped_paragraphs(docs / TABLES, "\n\n".join(reading))
    assert count == 1
    assert restored.split("\n\n") == [*reading[:dropped], native[dropped], *reading[dropped:]]


def test_left_out_tables_and_fragments_are_not_put_back(docs: Path) -> None:
    native = read_native_text(docs / TABLES).split("\n\n")
    kept = [block for block in native if not block.startswith("|") and len(block.split()) >= 3]
    reading = "\n\n".join(kept)
    assert restore_dropped_paragraphs(docs / TABLES, reading) == (reading, 0)
