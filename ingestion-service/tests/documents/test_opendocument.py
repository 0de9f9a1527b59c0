"""The in-process OpenDocument reader on real ODT/ODS/ODP files and on built, damaged or hostile ones."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from ingestion_service.documents.opendocument import OdfPage, read_opendocument, read_opendocument_title
from ingestion_service.documents.opendocument_xml import MAX_ROW_REPEAT, MAX_TABLE_COLUMNS
from ingestion_service.errors import (
    CORRUPT_REASON,
    ENCRYPTED_REASON,
    UNSUPPORTED_REASON,
    ExtractionError,
)

ODP = "odp/docling__odf_presentation_01.odp"  # three slides: a table, lists and a shape, text boxes; notes
ODT = "odt/docling__text_document_01.odt"  # headings, paragraphs, nested lists
ODS = "ods/docling__odf_table_with_title_01.ods"  # one sheet: a title cell above a two-column table

NS = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0" '
    'xmlns:dc="http://purl.org/dc/elements/1.1/"'
)


def _odf(path: Path, body: str, parts: dict[str, str] | None = None) -> Path:
    """A package whose content.xml holds ``body`` (unless ``parts`` gives content.xml itself)."""
    content = f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {NS}><office:body>{body}</office:body></office:document-content>'
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        for name, text in {"content.xml": content, **(parts or {})}.items():
            archive.writestr(name, text)
    return path


def _corrupt(path: Path) -> ExtractionError:
    with pytest.raises(ExtractionError) as caught:
        read_opendocument(path)
    assert caught.value.status_code == 422
    return caught.value


def test_presentation_gives_one_page_per_slide_with_its_title_text_and_notes(docs: Path) -> None:
    pages = read_opendocument(docs / ODP)

    assert [page.number for page in pages] == [0, 1, 2]
    first, second, third = (page.markdown for page in pages)
    assert first.startswith("## Test Table Slide\n\nWith footnote\n\n")
    assert "|  | Class1 |  |  | Class2 |  |  |\n| --- | --- | --- | --- | --- | --- | --- |" in first
    assert "| R1 | True | False |  | False | True | True |" in first
    assert second.startswith("## Second slide title\n\n- Let’s introduce a list\n- With foo\n- Bar\n- And baz things")
    assert "A rectangle shape with this text inside." in second
    assert second.endswith("### Notes\n\nSome notes on the second slide.")
    # No title placeholder: the slide is named by its position; runs split mid-word join up.
    assert third.startswith("## Slide 3\n\n- List item4\n")
    assert "Some info:\n\n- Item A\n- Item B" in third
    assert third.endswith("### Notes\n\nFinal notes on the third slide.\n\nSecond line of notes.")
    assert "notes" not in first.lower()


def test_text_document_headings_paragraphs_and_nested_lists(docs: Path) -> None:
    pages = read_opendocument(docs / ODT)

    assert len(pages) == 1
    assert pages[0].number == 0
    markdown = pages[0].markdown
    assert "\n\n# heading level 1.0\n\nLorem Ipsum\xa0is simply dummy text" in markdown  # a no-break space in the file
    assert "\n\n## Heading level 2: A\n\nContrary to popular belief" in markdown
    assert (
        "- numbered list 1\n- numbered list 2\n  - bullet list 2.1\n  - bullet list 2.2\n"
        "    - bullet list 2.2.1\n  - bullet list 2.3\n- numbered list 3\n"
    ) in markdown
    assert markdown.endswith("X2 + Y2 = Z")


def test_spreadsheet_gives_a_section_per_sheet_without_empty_rows_and_columns(docs: Path) -> None:
    pages = read_opendocument(docs / ODS)

    assert pages == [
        OdfPage(
            0,
            "## Sheet1\n\n| Number of freshwater ducks per year |  |\n| --- | --- |\n| Year | Freshwater Ducks |\n"
            "| 2019 | 120 |\n| 2020 | 135 |\n| 2021 | 150 |\n| 2022 | 170 |\n| 2023 | 160 |\n| 2024 | 180 |",
        )
    ]


def test_title_comes_from_meta_xml(docs: Path, tmp_path: Path) -> None:
    assert read_opendocument_title(docs / ODP) is None  # its dc:title is empty
    meta = f"<office:document-meta {NS}><office:meta><dc:title>  Duck\n survey </dc:title></office:meta></office:document-meta>"
    path = _odf(tmp_path / "titled.odt", "<office:text/>", {"meta.xml": meta})

    assert read_opendocument_title(path) == "Duck survey"


def test_inline_spaces_tabs_breaks_and_footnotes_and_no_comments_or_deletions(tmp_path: Path) -> None:
    paragraph = (
        "<text:p>  one  <text:span> two</text:span><text:s text:c='3'/>three<text:tab/>four<text:line-break/>five"
        "<text:note><text:note-citation>1</text:note-citation><text:note-body><text:p>A footnote.</text:p>"
        "</text:note-body></text:note><office:annotation><text:p>A comment.</text:p></office:annotation> six</text:p>"
    )
    deleted = "<text:tracked-changes><text:changed-region><text:deletion><text:p>Deleted.</text:p></text:deletion></text:changed-region></text:tracked-changes>"
    path = _odf(tmp_path / "inline.odt", f"<office:text>{deleted}{paragraph}</office:text>")

    assert read_opendocument(path) == [OdfPage(0, "one two   three\tfour\nfive[^1] six\n\n[^1]: A footnote.")]


def test_repeated_columns_and_rows_are_capped(tmp_path: Path) -> None:
    sheet = (
        "<office:spreadsheet><table:table table:name='Wide'>"
        "<table:table-row table:number-rows-repeated='1048576'>"
        "<table:table-cell table:number-columns-repeated='16384'><text:p>x</text:p></table:table-cell></table:table-row>"
        "<table:table-row table:number-rows-repeated='1048576'><table:table-cell table:number-columns-repeated='16384'/>"
        "</table:table-row></table:table></office:spreadsheet>"
    )

    lines = read_opendocument(_odf(tmp_path / "wide.ods", sheet))[0].markdown.split("\n")

    assert lines[0] == "## Wide"
    table = lines[2:]
    assert len(table) == MAX_ROW_REPEAT + 1  # the separator line, then the capped rows
    assert table[0] == "| " + " | ".join(["x"] * MAX_TABLE_COLUMNS) + " |"


def test_a_file_that_is_not_a_zip_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "fake.odt"
    path.write_bytes(b"plain text, not a package")

    assert _corrupt(path).reason == CORRUPT_REASON


def test_a_package_without_content_xml_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "empty.odt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("mimetype", "application/vnd.oasis.opendocument.text")

    error = _corrupt(path)
    assert error.reason == CORRUPT_REASON
    assert "no content.xml" in str(error)


def test_malformed_content_xml_is_corrupt(tmp_path: Path) -> None:
    path = _odf(
        tmp_path / "bad.odt", "", {"content.xml": f"<office:document-content {NS}><office:body><text:p>unclosed"}
    )

    error = _corrupt(path)
    assert error.reason == CORRUPT_REASON
    assert "content.xml: not well-formed" in str(error)


def test_an_entity_bomb_in_content_xml_is_refused(tmp_path: Path) -> None:
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        '<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">'
        '<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>'
        f"<office:document-content {NS}><office:body><office:text><text:p>&lol3;</text:p></office:text></office:body>"
        "</office:document-content>"
    )
    path = _odf(tmp_path / "bomb.odt", "", {"content.xml": bomb})

    error = _corrupt(path)
    assert error.reason == CORRUPT_REASON
    assert "DOCTYPE" in str(error)


def test_an_encrypted_package_is_reported_as_encrypted(tmp_path: Path) -> None:
    manifest = (
        '<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0">'
        '<manifest:file-entry manifest:full-path="content.xml"><manifest:encryption-data/></manifest:file-entry>'
        "</manifest:manifest>"
    )
    path = _odf(tmp_path / "locked.odt", "", {"content.xml": "\x00scrambled", "META-INF/manifest.xml": manifest})

    assert _corrupt(path).reason == ENCRYPTED_REASON


def test_a_body_that_is_no_document_kind_we_read_is_unsupported(tmp_path: Path) -> None:
    path = _odf(tmp_path / "chart.odc", "<office:chart/>")

    assert _corrupt(path).reason == UNSUPPORTED_REASON
