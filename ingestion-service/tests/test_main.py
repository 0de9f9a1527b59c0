"""``python -m ingestion_service``: an invalid setting stops start-up with one line naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import API_KEY, REPO_ROOT  # noqa: TID252

CONFIG_ERROR_EXIT = 2


def _start(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run the service's entry point in ``tmp_path`` (no .env there) with only ``env`` set."""
    base = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "API_KEY": API_KEY,
        "QDRANT_PATH": str(tmp_path / "qdrant"),
        "LOCAL_MODELS_DIR": os.environ.get("LOCAL_MODELS_DIR", str(REPO_ROOT / ".cache/models")),
        "HOST": "127.0.0.1",
        "PORT": "18765",  # never bound: start-up fails before the server listens
        "LOG_FORMAT": "text",
    }
    if "PYTHONPATH" in os.environ:
        base["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.run(
        [sys.executable, "-m", "ingestion_service"],
        cwd=tmp_path,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(("variable", "value"), [("QDRANT_TIMEOUT", "-1"), ("LOG_LEVEL", "verbose")])
def test_an_invalid_setting_is_one_line_naming_it(tmp_path: Path, variable: str, value: str) -> None:
    result = _start(tmp_path, **{variable: value})
    assert result.returncode == CONFIG_ERROR_EXIT, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{variable}: ")


def test_scratch_dir_on_a_file_is_one_line_naming_it(tmp_path: Path) -> None:
    in_the_way = tmp_path / "not-a-directory"
    in_the_way.write_text("x")
    result = _start(tmp_path, SCRATCH_DIR=str(in_the_way))
    assert result.returncode == CONFIG_ERROR_EXIT, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(f"SCRATCH_DIR: cannot use {in_the_way}")
