"""Intake: what a request passes through before the pipeline (the gates), where its source is staged
(an upload or an S3 object on local disk, checked and identified), and its hand-off to the runner."""

__all__: list[str] = []
