"""Chart data and XLSX text boxes from real and built OOXML files, and dropping what is already extracted."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from ingestion_service.documents import office_extras
from ingestion_service.documents.office_extras import OfficeExtrasError, dedupe_against, office_extra_markdown

CHARTS_DOCX = "docx/tika__testWORD_charts.docx"  # a pie chart, its only text
TEXT_BOX_XLSX = "xlsx/tika__testEXCEL_textbox.xlsx"  # empty sheets and one text box
CHART_PPTX = "pptx/docling__pptx_chart.pptx"  # two slides, a chart on each
SMARTART_PPTX = "pptx/tika__testPPT_diagramData.pptx"  # an organisation chart drawn as SmartArt
TABLES_DOCX = "docx/docling__word_tables.docx"  # tables, no charts
ODT = "odt/docling__text_document_01.odt"

DOCX_MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
C = 'xmlns:c="http://schemas.openxmlformats.org/drawingml/2006/chart"'
A = 'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'
MC = 'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"'


def _package(path: Path, parts: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in parts.items():
            archive.writestr(name, text)
    return path


def _chart(plot: str, title: str = "") -> str:
    title_xml = f"<c:title><c:tx><c:rich><a:p><a:r><a:t>{title}</a:t></a:r></a:p></c:rich></c:tx></c:title>"
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><c:chartSpace {C} {A} {MC}><c:chart>'
        f"{title_xml if title else ''}<c:plotArea>{plot}</c:plotArea></c:chart></c:chartSpace>"
    )


def _num(points: dict[int, str]) -> str:
    pts = "".join(f'<c:pt idx="{index}"><c:v>{value}</c:v></c:pt>' for index, value in points.items())
    return f"<c:numRef><c:numCache><c:ptCount val='9'/>{pts}</c:numCache></c:numRef>"


def _series(name: str, values: dict[int, str], categories: str = "") -> str:
    tx = f"<c:tx><c:strRef><c:strCache><c:pt idx='0'><c:v>{name}</c:v></c:pt></c:strCache></c:strRef></c:tx>"
    return f"<c:ser>{tx}{categories}<c:val>{_num(values)}</c:val></c:ser>"


def test_docx_chart_becomes_a_titled_table_of_its_cached_data(docs: Path) -> None:
    markdown = office_extra_markdown(docs / CHARTS_DOCX, DOCX_MIME)

    assert markdown.startswith("### Chart: wants a peach\n\n| category | NUMBER |\n| --- | --- |\n")
    assert "| January | 5 |" in markdown
    assert "| August | 6 |" in markdown
    assert markdown.count("\n| ") == 1 + 1 + 8  # header, separator, one row per month


def test_xlsx_text_box_becomes_a_text_box_section(docs: Path) -> None:
    assert office_extra_markdown(docs / TEXT_BOX_XLSX, None) == "### Text box\n\nthis is some autoshape text"


def test_pptx_charts_come_in_part_order_with_every_series(docs: Path) -> None:
    markdown = office_extra_markdown(docs / CHART_PPTX, None)

    first, second = markdown.split("\n\n### Chart")
    assert first.startswith("### Chart: Wild Duck Observations by Year")
    assert "| category | Freshwater Ducks | Saltwater Ducks |" in first
    assert "| 2022 | 175 | 130 |" in first
    # An empty c:title over a single series shows that series' name, as Office draws it.
    assert second.startswith(": 2026\n")
    assert "| Q3 | 30 |" in second


def test_smartart_text_becomes_a_nested_list_following_the_diagram_tree(docs: Path) -> None:
    assert office_extra_markdown(docs / SMARTART_PPTX, None) == (
        "### Diagram\n\n- President\n  - VP – HR\n    - Manager 1\n  - VP - Marketing\n    - Manager 1"
    )


def test_documents_without_charts_or_text_boxes_give_nothing(docs: Path) -> None:
    assert office_extra_markdown(docs / TABLES_DOCX, DOCX_MIME) == ""
    # Not an OOXML package at all: the parts decide, whatever the hint says.
    assert office_extra_markdown(docs / ODT, DOCX_MIME) == ""


def test_value_only_charts_with_gaps_several_series_in_natural_part_order(tmp_path: Path) -> None:
    gapped = _series("North", {0: "4.4000000000000004", 2: "7"}) + _series("South", {0: "1", 1: "2", 2: "3"})
    categories = "<c:cat><c:strRef><c:strCache><c:pt idx='0'><c:v>Q1</c:v></c:pt></c:strCache></c:strRef></c:cat>"
    path = _package(
        tmp_path / "built.docx",
        {
            "word/document.xml": "<w:document/>",
            "word/charts/chart10.xml": _chart(
                f"<c:lineChart>{_series('Only', {0: '1'}, categories)}</c:lineChart>", "Ten"
            ),
            "word/charts/chart2.xml": _chart(f"<c:barChart>{gapped}</c:barChart>"),
            "word/charts/style2.xml": f"<cs:chartStyle xmlns:cs='urn:style' {A}/>",
        },
    )

    assert office_extra_markdown(path, DOCX_MIME) == (
        "### Chart\n\n"
        "| North | South |\n| --- | --- |\n| 4.4 | 1 |\n|  | 2 |\n| 7 | 3 |\n\n"
        "### Chart: Ten\n\n| category | Only |\n| --- | --- |\n| Q1 | 1 |"
    )


def test_alternate_content_is_read_once(tmp_path: Path) -> None:
    shape = "<xdr:sp><xdr:txBody><a:p><a:r><a:t>{}</a:t></a:r></a:p></xdr:txBody></xdr:sp>"
    drawing = (
        '<xdr:wsDr xmlns:xdr="http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing" '
        f"{A} {MC}><mc:AlternateContent><mc:Choice Requires='a14'>{shape.format('Shown once')}</mc:Choice>"
        f"<mc:Fallback>{shape.format('Shown once')}</mc:Fallback></mc:AlternateContent></xdr:wsDr>"
    )
    path = _package(tmp_path / "b.xlsx", {"xl/workbook.xml": "<workbook/>", "xl/drawings/drawing1.xml": drawing})

    assert office_extra_markdown(path, None) == "### Text box\n\nShown once"


def test_parts_above_the_size_limit_are_skipped(docs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(office_extras, "MAX_PART_BYTES", 1000)  # the real chart part is 8 KB

    assert office_extra_markdown(docs / CHARTS_DOCX, DOCX_MIME) == ""


def test_a_file_that_is_not_a_zip_raises_the_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "fake.docx"
    path.write_bytes(b"not a zip archive")

    with pytest.raises(OfficeExtrasError, match="not a readable ZIP"):
        office_extra_markdown(path, DOCX_MIME)


def test_malformed_chart_xml_raises_the_typed_error(tmp_path: Path) -> None:
    path = _package(
        tmp_path / "bad.pptx",
        {"ppt/presentation.xml": "<p:presentation/>", "ppt/charts/chart1.xml": "<c:chartSpace><unclosed>"},
    )

    with pytest.raises(OfficeExtrasError, match=r"ppt/charts/chart1\.xml: not well-formed"):
        office_extra_markdown(path, None)


def test_doctype_and_entities_in_a_part_are_refused(tmp_path: Path) -> None:
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        '<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>'
        f"<c:chartSpace {C} {A}><c:chart><c:title><c:tx><c:rich><a:p><a:r><a:t>&lol2;</a:t></a:r></a:p>"
        "</c:rich></c:tx></c:title></c:chart></c:chartSpace>"
    )
    path = _package(tmp_path / "bomb.xlsx", {"xl/workbook.xml": "<workbook/>", "xl/charts/chart1.xml": bomb})

    with pytest.raises(OfficeExtrasError, match="DOCTYPE"):
        office_extra_markdown(path, None)


def test_dedupe_drops_sections_already_extracted_and_keeps_new_ones(docs: Path) -> None:
    extras = office_extra_markdown(docs / CHART_PPTX, None) + "\n\n" + office_extra_markdown(docs / TEXT_BOX_XLSX, None)
    # The text box's sentence is already there (other case, other spacing); the charts are not.
    existing = "## Quarterly Duck Survey\n\nThis is   SOME autoshape\ntext, said the sheet."

    kept = dedupe_against(existing, extras)

    assert "this is some autoshape text" not in kept
    assert kept.startswith("### Chart: Wild Duck Observations by Year")
    assert "### Chart: 2026" in kept
    assert kept.count("### ") == 2


def test_dedupe_against_text_that_already_holds_the_extras_drops_them_all(docs: Path) -> None:
    extras = office_extra_markdown(docs / CHART_PPTX, None) + "\n\n" + office_extra_markdown(docs / SMARTART_PPTX, None)

    assert dedupe_against("## Quarterly Duck Survey\n\n" + extras, extras) == ""


def test_dedupe_keeps_a_chart_whose_table_is_only_partly_present(docs: Path) -> None:
    extras = office_extra_markdown(docs / CHARTS_DOCX, DOCX_MIME)
    existing = "wants a peach\n\n| category | NUMBER |\n| --- | --- |\n| January | 5 |"

    assert dedupe_against(existing, extras) == extras
