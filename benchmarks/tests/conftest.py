from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("LOCAL_MODELS_DIR", str(REPO_ROOT / ".cache/models"))
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
