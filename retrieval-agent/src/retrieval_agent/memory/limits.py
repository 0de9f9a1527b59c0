"""Limits of a fact that the memory layer and the memory API's wire models both enforce.

Pure constants, so that ``retrieval_agent.api.memory_models`` (which the CLI imports) loads no store.
"""

from __future__ import annotations

from typing import Final

MAX_FACT_CHARS: Final = 2_000
# The most of one fact file that is read: a hand-written file may be any size, a prompt takes a few
# thousand characters of it (MEMORY_MAX_FACT_CHARS_IN_PROMPT, at most MAX_PROMPT_FACT_CHARS).
MAX_PROMPT_FACT_CHARS: Final = 16_000
# 72 KiB: MAX_PROMPT_FACT_CHARS characters of up to 4 UTF-8 bytes each, and room for the front matter.
MAX_FACT_FILE_BYTES: Final = 72 * 1024
