"""XLSX and XLS workbooks built in memory for the structural-limit tests (a few KB at most)."""

from __future__ import annotations

import io
import zipfile

import xlwt
from xlwt.CompoundDoc import XlsDoc

# Cells of an XLS sheet: (row, column, value); a value of None is a styled blank.
XlsCells = list[tuple[int, int, object]]

MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
RELS = "http://schemas.openxmlformats.org/package/2006/relationships"
OFFICE_RELS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
WORKSHEET = f"{OFFICE_RELS}/worksheet"
PACKAGE_RELS = (
    f'<Relationships xmlns="{RELS}">'
    f'<Relationship Id="rId1" Type="{OFFICE_RELS}/officeDocument" Target="xl/workbook.xml"/></Relationships>'
)


def xlsx(sheet_data: str, *, sheet: str = "xl/worksheets/sheet1.xml", target: str = "worksheets/sheet1.xml") -> bytes:
    """A workbook whose one sheet (``sheet``, reached by the relationship ``target``) holds ``sheet_data``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("_rels/.rels", PACKAGE_RELS)
        archive.writestr(
            "xl/workbook.xml",
            f'<workbook xmlns="{MAIN}" xmlns:r="{OFFICE_RELS}"><sheets><sheet name="S" sheetId="1" r:id="rId1"/></sheets></workbook>',
        )
        archive.writestr(
            "xl/_rels/workbook.xml.rels",
            f'<Relationships xmlns="{RELS}"><Relationship Id="rId1" Type="{WORKSHEET}" Target="{target}"/>'
            "</Relationships>",
        )
        archive.writestr(
            sheet, f'<?xml version="1.0"?><worksheet xmlns="{MAIN}"><sheetData>{sheet_data}</sheetData></worksheet>'
        )
    return buffer.getvalue()


def value(ref: str) -> str:
    """A cell at ``ref`` holding a short string."""
    return f'<c r="{ref}" t="inlineStr"><is><t>zebra</t></is></c>'


def xls_stream(sheets: list[XlsCells]) -> bytes:
    """The BIFF8 workbook stream of ``sheets``, to patch records into before :func:`xls`."""
    workbook = xlwt.Workbook()
    styled = xlwt.easyxf("pattern: pattern solid;")
    for index, cells in enumerate(sheets):
        sheet = workbook.add_sheet(f"S{index}")
        for row, col, cell in cells:
            sheet.write(row, col, cell, styled)
    return bytes(workbook.get_biff_data())


def xls(stream: bytes) -> bytes:
    """A workbook ``stream`` in its OLE2 container, as Excel 97-2003 writes it."""
    buffer = io.BytesIO()
    XlsDoc().save(buffer, stream)
    return buffer.getvalue()


def sparse_xls_bomb(sheets: int = 3) -> bytes:
    """5.6 KB: two cells per sheet, A1 and IV65536; the engine built 3 × 16.7 M cells (3.4 GB, 16 s)."""
    return xls(xls_stream([[(0, 0, "a"), (65535, 255, "z")]] * sheets))
