"""Peak resident memory of a process tree, sampled in a background thread."""

from __future__ import annotations

import threading

import psutil


class PeakRss:
    """Polls RSS of `pid` and its children every `interval` s while active (a context manager)."""

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_bytes = 0
        self.start_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> int:
        try:
            process = psutil.Process(self.pid)
            total = process.memory_info().rss
            for child in process.children(recursive=True):
                try:
                    total += child.memory_info().rss
                except psutil.NoSuchProcess:
                    continue
        except psutil.NoSuchProcess:
            return 0
        return int(total)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, self._sample())
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakRss:
        self.start_bytes = self._sample()
        self.peak_bytes = self.start_bytes
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    @property
    def peak_mib(self) -> float:
        return self.peak_bytes / 2**20

    @property
    def start_mib(self) -> float:
        return self.start_bytes / 2**20
