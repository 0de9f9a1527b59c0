"""A run's control: its stage progress, as jobs show it."""

from __future__ import annotations

from ingestion_service.run_control import RunControl, StageProgress, active, report_progress


def test_a_stage_keeps_its_clock_until_the_next_stage_starts() -> None:
    control = RunControl(timeout_seconds=60)
    with active(control):
        report_progress("embedding", 0, 10)
        first = control.stage
        report_progress("embedding", 4, 10)
        later = control.stage
        report_progress("writing", 0, 10)
        writing = control.stage
    assert first is not None
    assert later is not None
    assert writing is not None
    assert (later.stage, later.done, later.total, later.started) == ("embedding", 4, 10, first.started)
    assert (writing.stage, writing.done) == ("writing", 0)
    assert writing.started >= first.started


def test_progress_outside_a_run_is_ignored() -> None:
    control = RunControl(timeout_seconds=60)
    report_progress("embedding", 1, 2)
    assert control.stage is None


def test_the_stage_eta_is_its_pace_so_far_times_what_is_left() -> None:
    assert StageProgress("embedding", 0, 10, started=100.0).eta_seconds(130.0) is None
    # 4 of 10 in 20 s: 5 s each, 6 to go.
    assert StageProgress("embedding", 4, 10, started=100.0).eta_seconds(120.0) == 30.0
    assert StageProgress("writing", 10, 10, started=100.0).eta_seconds(120.0) == 0.0
