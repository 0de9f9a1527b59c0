"""XLSX workbooks built in memory for the structural-limit tests (a few hundred bytes each)."""

from __future__ import annotations

import io
import zipfile

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
