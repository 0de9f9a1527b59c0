"""The cells of a CSV/TSV: rows × the widest row, for whichever delimiter the engine picks."""

from __future__ import annotations

import itertools
from pathlib import Path

from ingestion_service.documents.structure_limits.common import DELIMITERS, QUOTED, Tally
from ingestion_service.documents.structure_limits.markup import file_chunks


def delimited_cells(path: Path, tally: Tally) -> None:
    """Rows × the widest row, for whichever delimiter the engine picks (the widest count of any);
    delimiters and line breaks inside double quotes do not count (the engine's quotes open anywhere)."""
    rows = width = 0
    open_row = [0] * len(DELIMITERS)  # delimiters of the row not yet ended (it may span pieces)
    open_started = quoted = False
    with path.open("rb") as handle:
        for chunk in file_chunks(handle):
            # The engine ends a row at CR, LF or CRLF (a CRLF cut between pieces adds an empty row).
            piece = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if quoted:
                closing = piece.find(b'"')
                if closing < 0:
                    continue  # all inside the open quote
                piece, quoted, open_started = piece[closing + 1 :], False, True
            # Quoted spans become one plain byte; a quote left open runs into the next piece.
            plain = QUOTED.sub(b"_", piece)
            opening = plain.find(b'"')
            if opening >= 0:
                plain, quoted = plain[:opening] + b"_", True
            *complete, partial = plain.split(b"\n")
            if complete:
                ended = [count + complete[0].count(mark) for count, mark in zip(open_row, DELIMITERS, strict=True)]
                rows, width = rows + len(complete), max(width, max(ended) + 1)
                if len(complete) > 1:
                    rest = complete[1:]
                    widest = max(max(map(bytes.count, rest, itertools.repeat(mark))) for mark in DELIMITERS)
                    width = max(width, widest + 1)
                open_row, open_started = [0] * len(DELIMITERS), False
            open_row = [count + partial.count(mark) for count, mark in zip(open_row, DELIMITERS, strict=True)]
            open_started = open_started or bool(partial)
            tally.check(rows * width)
    if open_started:
        rows, width = rows + 1, max(width, max(open_row) + 1)
    tally.add(rows * width)
