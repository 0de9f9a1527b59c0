"""A ``git`` on PATH for fault injection: the real git, run under a file-size limit of 0 while the disk
is "full" (every write git makes fails, as on a full disk: ``unable to write loose object file``), or
answering a failure after a commit that it made.

The memory layer runs git by the path it finds at start-up (``find_git``), so a test puts this one
first on PATH (or hands its path to ``FactRepository``) and flips its state between requests.
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

_SCRIPT = """#!/bin/sh
state={state}
real={real}
if [ -e "$state/full" ]; then
  # SIGXFSZ ignored: a write past the limit fails with EFBIG instead of killing git.
  trap '' XFSZ
  ulimit -f 0
fi
if [ -e "$state/fail-after-commit" ]; then
  for argument in "$@"; do
    if [ "$argument" = commit ]; then
      "$real" "$@" || exit $?
      echo "fatal: unable to write new index file" >&2
      exit 128
    fi
  done
fi
exec "$real" "$@"
"""


class FaultyGit:
    def __init__(self, folder: Path) -> None:
        real = shutil.which("git")
        assert real is not None, "the memory tests need git"
        self.bin_dir = folder / "bin"
        self._state = folder / "state"
        self.bin_dir.mkdir(parents=True)
        self._state.mkdir()
        self.path = self.bin_dir / "git"
        self.path.write_text(_SCRIPT.format(state=shlex.quote(str(self._state)), real=shlex.quote(real)))
        self.path.chmod(0o755)

    def path_env(self) -> str:
        """PATH with this git first."""
        return f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"

    def disk_full(self, full: bool = True) -> None:
        self._flag("full", full)

    def fail_after_commit(self, failing: bool = True) -> None:
        self._flag("fail-after-commit", failing)

    def _flag(self, name: str, on: bool) -> None:
        if on:
            (self._state / name).touch()
        else:
            (self._state / name).unlink(missing_ok=True)
