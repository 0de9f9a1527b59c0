"""A forced OCR's reading without the text layer's tables (kreuzberg appends them after the OCR text)."""

from __future__ import annotations

from types import SimpleNamespace

from ingestion_service.documents.kreuzberg_local import ocr_reading

GARBAGE = "| «POAH «3E*»CM | inc. |\n| --- | --- |\n| toi n»Bfl. | and |"
SCANNED = "| Year | Ducks |\n| --- | --- |\n| 2024 | 12 |"


def table(markdown: str) -> SimpleNamespace:
    return SimpleNamespace(markdown=markdown)


def test_the_text_layers_table_goes_and_a_table_read_from_the_image_stays() -> None:
    escaped = GARBAGE.replace("*", "\\*")  # the Markdown escapes what the table's own Markdown does not
    forced = SimpleNamespace(
        content=f"Letter text read by OCR.\n\n{SCANNED}\n\n{escaped}\n",
        tables=[table(SCANNED), table(GARBAGE)],
    )
    text_layer = SimpleNamespace(content="«POAH garbage", tables=[table(GARBAGE)])
    assert ocr_reading(forced, text_layer) == f"Letter text read by OCR.\n\n{SCANNED}\n\n"


def test_without_tables_the_reading_is_the_ocr_text() -> None:
    forced = SimpleNamespace(content="Only text.", tables=None)
    assert ocr_reading(forced, SimpleNamespace(content="", tables=None)) == "Only text."
