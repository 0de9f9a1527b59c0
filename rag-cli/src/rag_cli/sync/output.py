"""What ``rag sync`` prints: the summary line, the tables, the report."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    pass

from rag_cli.sync.plan import SyncReport


def summary_line(report: SyncReport) -> str:
    """``3 added, 1 changed, 0 unchanged, 0 removed, 0 failed`` (plain text, for logs and scripts)."""
    return ", ".join(f"{count} {name}" for name, count in report.counts().items())


_STYLES = {"added": "green", "changed": "cyan", "unchanged": "dim", "removed": "yellow", "failed": "red"}
_PLANNED = {"added": "to add", "changed": "to change", "removed": "to remove"}


def summary_table(report: SyncReport) -> Table:
    """One row per outcome with its count."""
    # Short: a table is as wide as its title; the summary line names the source.
    title = "Sync plan (dry run: nothing changed)" if report.dry_run else "Sync summary"
    table = Table(title=title, min_width=len(title) + 4)
    table.add_column("outcome")
    table.add_column("files", justify="right")
    for name, count in report.counts().items():
        label = _PLANNED.get(name, name) if report.dry_run else name
        style = _STYLES[name]
        table.add_row(f"[{style}]{label}[/{style}]" if count else label, str(count))
    return table


def files_table(report: SyncReport) -> Table | None:
    """Each added, changed, removed or failed file, with the failure's reason; None when there is none."""
    if not report.touched:
        return None
    table = Table(title="Files")
    table.add_column("outcome")
    table.add_column("path", overflow="fold")
    table.add_column("error", overflow="fold")
    for name, paths in (("added", report.added), ("changed", report.changed), ("removed", report.removed)):
        label = _PLANNED[name] if report.dry_run else name
        for path in paths:
            table.add_row(label, escape(path), "")
    for failure in report.failures:
        table.add_row(f"[red]failed ({failure.action})[/red]", escape(failure.path), escape(failure.error))
    return table


def print_report(console: Console, report: SyncReport, *, brief: bool = False) -> None:
    """The files table, then the summary (``brief``: a line instead of the table, for watch rounds)."""
    files = files_table(report)
    if files is not None:
        console.print(files)
    for path in report.skipped:
        console.print(
            f"skipped {escape(path)}: not a document (the service read it as no supported type)", soft_wrap=True
        )
    if not brief:
        console.print(summary_table(report))
    # One unwrapped line, whatever the terminal width: scripts and logs grep it.
    console.print(
        f"{'planned' if report.dry_run else 'synced'} {escape(report.root_uri)}: {summary_line(report)}",
        soft_wrap=True,
    )
