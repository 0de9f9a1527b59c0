"""Limits of a fact that the memory layer and the memory API's wire models both enforce.

Pure constants, so that ``retrieval_agent.api.memory_models`` (which the CLI imports) loads no store.
"""

from __future__ import annotations

from typing import Final

MAX_FACT_CHARS: Final = 2_000
