"""The documents, questions and expected answers of the acceptance run (read with pdfium beforehand)."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"

# A ten-page contract with distinct text on every page (copied from tests-integration/fixtures).
CONTRACT = FIXTURES / "kreuzberg__sample_contract.pdf"
CONTRACT_NAME = "sample_contract.pdf"
# The answer is on the third page, 0-based page 2: only that page has the 120 days' notice.
CONTRACT_QUESTION = "How many days of advance written notice must the consultant give to terminate the agreement?"
CONTRACT_ANSWER_TEXT = "twenty (120) days advance written notice"
CONTRACT_ANSWER_PAGE = 2  # 0-based, as stored and as Open WebUI's citations carry it
# As people count it: the Function labels each passage <source id=".." name=".." page="3">.
CONTRACT_ANSWER_LABEL = r'\bpage="3"'

# A one-page scan with no text layer: only OCR reads it.
SCAN = FIXTURES / "kreuzberg__non_searchable.pdf"
SCAN_NAME = "scanned_notice.pdf"
SCAN_QUESTION = "Why can a PDF created from an image not be rendered as plain text?"
SCAN_ANSWER_TEXT = "non-text-searchable PDF"
SCAN_ANSWER_PAGE = 0

# The same contract ingested straight into a knowledge-base tenant of our store (PUT /api/v1/ingest),
# under its own id and name, and asked through the retrieval agent's OpenAI connection.
HANDBOOK = "handbook"  # the tenant (collection_name), so the model <CHAT_DEFAULT_MODEL>@handbook
HANDBOOK_NAME = "Contract Handbook"  # CHAT_KNOWLEDGE_BASE_NAMES: what Open WebUI shows
HANDBOOK_FILE_ID = "handbook-consulting-agreement"
HANDBOOK_FILE_NAME = "consulting_agreement.pdf"
