"""The cells of old binary XLS (BIFF5/8 in an OLE2 container): the box from each sheet's first to
its last value."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import olefile

from ingestion_service.documents.structure_limits.common import Tally

_XLS_STREAMS = ("Workbook", "Book")  # BIFF8, BIFF5
_XLS_BOF, _XLS_EOF, _XLS_BOUNDSHEET, _XLS_MULRK = 0x0809, 0x000A, 0x0085, 0x00BD
# Records that put a value in a cell, row and column first: FORMULA, LABELSST, NUMBER, LABEL, BOOLERR,
# RK, RSTRING. Blank cells (BLANK, MULBLANK), styled or not, do not widen the engine's grid.
_XLS_VALUES = frozenset({0x0006, 0x00FD, 0x0203, 0x0204, 0x0205, 0x027E, 0x00D6})
# A record's header (type, size), and a cell record's start (row, column).
_TWO_U16 = struct.Struct("<HH")
# What olefile raises for a damaged container; the engine reports the damage.
_OLE_DAMAGE = (OSError, ValueError, IndexError, KeyError, struct.error)


def xls_cells(path: Path, tally: Tally) -> None:
    """Each sheet the workbook lists costs its grid once per listing: the engine builds a sheet as the
    box from its first to its last value (two cells at A1 and IV65536 of a 5.6 KB file: 16.7 M cells,
    3.4 GB). A FILEPASS (encryption) record changes nothing: the engine reads the cells after it."""
    try:
        if not olefile.isOleFile(str(path)):
            return
        with olefile.OleFileIO(str(path)) as ole:
            stream = next((name for name in _XLS_STREAMS if ole.exists(name)), None)
            if stream is None or ole.get_type(stream) != olefile.STGTY_STREAM:
                return
            with ole.openstream(stream) as handle:
                workbook = handle.read()
    except _OLE_DAMAGE:
        return
    offsets: list[int] = []
    for kind, data in _biff_records(workbook, 0):
        if kind == _XLS_BOUNDSHEET and len(data) >= 4:
            offsets.append(int.from_bytes(data[:4], "little"))
    for offset in offsets:
        tally.add(_xls_sheet_cells(workbook, offset))


def _xls_sheet_cells(workbook: bytes, offset: int) -> int:
    """The box of a sheet's values, embedded substreams (charts) included."""
    first_row = first_col = 1 << 32
    last_row = last_col = -1
    for kind, data in _biff_records(workbook, offset):
        if kind in _XLS_VALUES and len(data) >= _TWO_U16.size:
            row, col = _TWO_U16.unpack_from(data)
            cols = (col, col)
        elif kind == _XLS_MULRK and len(data) >= 6:
            row, col = _TWO_U16.unpack_from(data)
            cols = (col, int.from_bytes(data[-2:], "little"))
        else:
            continue
        first_row, last_row = min(first_row, row), max(last_row, row)
        first_col, last_col = min(first_col, *cols), max(last_col, *cols)
    if last_row < 0:
        return 0
    return (last_row - first_row + 1) * (last_col - first_col + 1)


def _biff_records(workbook: bytes, offset: int) -> Iterator[tuple[int, memoryview]]:
    """The records of the substream starting at ``offset``, up to its EOF (nested substreams included)."""
    view = memoryview(workbook)
    depth = 0
    while offset + _TWO_U16.size <= len(workbook):
        kind, size = _TWO_U16.unpack_from(workbook, offset)
        start = offset + _TWO_U16.size
        offset = start + size
        yield kind, view[start : min(offset, len(workbook))]
        if kind == _XLS_BOF:
            depth += 1
        elif kind == _XLS_EOF:
            depth -= 1
            if depth <= 0:
                return
