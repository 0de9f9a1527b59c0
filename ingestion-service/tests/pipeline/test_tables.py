"""Pipe tables as cells: header and title rows, blocks of a sheet, compaction, column names."""

from __future__ import annotations

from ingestion_service.pipeline.tables import is_separator, keyed_row, parse_pipe_table, split_cells


def test_a_plain_table_has_its_header_and_rows() -> None:
    [table] = parse_pipe_table(["| Name | Qty |", "| --- | ---: |", "| Apples | 3 |", "| Pears | 5 |"])
    assert table.header == ["Name", "Qty"]
    assert table.rows == [["Apples", "3"], ["Pears", "5"]]
    assert table.titles == []
    assert table.markdown() == "| Name | Qty |\n| --- | --- |\n| Apples | 3 |\n| Pears | 5 |"


def test_lines_without_a_separator_are_not_a_table() -> None:
    assert parse_pipe_table(["| a | b |", "| c | d |"]) == []
    assert not is_separator("| a | --- |")
    assert is_separator("|:---|---:|")


def test_escaped_pipes_stay_inside_their_cell() -> None:
    assert split_cells(r"| a \| b | c |") == [r"a \| b", "c"]


def test_empty_columns_and_rows_are_dropped() -> None:
    [table] = parse_pipe_table(
        ["| Year |  | Ducks |  |", "| --- | --- | --- | --- |", "|  |  |  |  |", "| 2019 |  | 120 |  |"]
    )
    assert table.header == ["Year", "Ducks"]
    assert table.rows == [["2019", "120"]]


def test_a_sheet_title_above_its_header_is_a_title_line() -> None:
    lines = [
        "| 3. Analyses by segment |  |  |  |",
        "| --- | --- | --- | --- |",
        "| In millions of CHF |  |  |  |",
        "|  | Sales | Profit | Margin |",
        "| Zone NA | 12553 | 2713 | 21.6% |",
        "| Nespresso | 3128 | 678 | 21.7% |",
    ]
    [table] = parse_pipe_table(lines)
    assert table.titles == ["3. Analyses by segment", "In millions of CHF"]
    assert table.header == ["", "Sales", "Profit", "Margin"]
    assert table.rows[1] == ["Nespresso", "3128", "678", "21.7%"]


def test_a_two_column_sheet_keeps_its_title_above_the_header() -> None:
    lines = [
        "| Number of freshwater ducks per year |  |",
        "| --- | --- |",
        "| Year | Freshwater Ducks |",
        "| 2019 | 120 |",
        "| 2020 | 135 |",
    ]
    [table] = parse_pipe_table(lines)
    assert table.titles == ["Number of freshwater ducks per year"]
    assert table.header == ["Year", "Freshwater Ducks"]
    assert table.column_names() == ["Year", "Freshwater Ducks"]
    assert table.rows == [["2019", "120"], ["2020", "135"]]


def test_a_two_column_table_with_a_half_empty_header_keeps_it() -> None:
    # Text below the header, not numbers: the one-name header row is the header.
    lines = ["| Term |  |", "| --- | --- |", "| Tenure | Years of service |", "| Grade | Pay band |"]
    [table] = parse_pipe_table(lines)
    assert table.titles == []
    assert table.header == ["Term", ""]


def test_a_blank_row_then_a_title_row_starts_the_next_block_of_a_sheet() -> None:
    lines = [
        "| January–June 2023 |  |  |",
        "| --- | --- | --- |",
        "|  | Sales | Profit |",
        "| Zone NA | 12553 | 2713 |",
        "|  |  |  |",
        "| January–June 2022 |  |  |",
        "|  | Sales | Profit |",
        "| Zone NA | 12138 | 2284 |",
    ]
    first, second = parse_pipe_table(lines)
    assert first.titles == ["January–June 2023"]
    assert second.titles == ["January–June 2022"]
    assert second.header == ["", "Sales", "Profit"]
    assert second.rows == [["Zone NA", "12138", "2284"]]


def test_a_blank_row_inside_a_table_does_not_split_it() -> None:
    lines = ["| A | B | C |", "| --- | --- | --- |", "| 1 | 2 | 3 |", "|  |  |  |", "| 4 | 5 | 6 |"]
    [table] = parse_pipe_table(lines)
    assert table.rows == [["1", "2", "3"], ["4", "5", "6"]]


def test_a_header_cell_spanning_columns_names_each_of_them() -> None:
    [table] = parse_pipe_table(["|  | Class1 |  | Class2 |", "| --- | --- | --- | --- |", "| R1 | a | b | c |"])
    assert table.column_names() == ["", "Class1", "Class1", "Class2"]


def test_a_keyed_row_names_every_value_and_leads_with_its_key() -> None:
    names = ["", "Sales", "Profit", "Note"]
    assert keyed_row(names, ["Nespresso", "3128", "678", ""]) == "Nespresso; Sales: 3128; Profit: 678"
    assert keyed_row(["Year", "Ducks"], ["2020", "135"]) == "Year: 2020; Ducks: 135"
