"""Indexing one file: the pipeline's assembly, the job a request hands in, the runner, and the versioning
protocol that makes each run atomic to readers."""

__all__: list[str] = []
