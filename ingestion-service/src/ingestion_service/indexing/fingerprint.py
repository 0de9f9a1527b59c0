"""The ingest fingerprint: everything besides a file's bytes that decides its chunks and vectors.

Same source sha256 + same fingerprint = the points an ingest would write are the ones stored, so
the ingest can answer ``unchanged`` without extracting or embedding. Any setting that changes
text, chunking or vectors is marked ``Fingerprint.SHAPES``; one that does not (timeouts, limits,
ports) is ``OPERATIONAL``, or every restart with a new timeout would re-embed everything.
"""

from __future__ import annotations

import hashlib
import json
from typing import Final

from ingestion_service.settings import Settings
from shared_contract import CONTRACT_VERSION, manifest_for
from shared_contract.settings import fingerprint_fields

# Bumped whenever the splitters cut chunks, or build what is indexed for them, differently for the
# same settings (2: whole blocks, tables between rows, a title and context indexed with each chunk).
CHUNKING_REVISION: Final = 2
# Bumped whenever the engines' text or document metadata for the same bytes and settings changes
# (1: a Markdown file's front matter read into its labels and left out of its text; 2: a PDF
# chunk's regions on its page; 3: right-to-left PDF pages in reading order, a PDF's pages cut where
# each one's own text follows).
EXTRACTION_REVISION: Final = 3

# The settings that shape extraction, chunking, vectors and the lexical entries: those marked
# ``Fingerprint.SHAPES`` in settings.py (every field is marked one way or the other).
FINGERPRINT_SETTINGS: Final = fingerprint_fields(Settings)


def ingest_fingerprint(settings: Settings, engine: str) -> str:
    """A short digest of the contract's models and the settings above, for the engine this ingest uses."""
    manifest = manifest_for(settings).model_dump(exclude={"created_at", "contract_version"})
    shaping = {name: getattr(settings, name) for name in FINGERPRINT_SETTINGS}
    document = {
        # The major.minor contract: a new minor may change payloads (it adds keys).
        "contract": CONTRACT_VERSION.rsplit(".", 1)[0],
        "manifest": manifest,
        "settings": shaping,
        "chunking": CHUNKING_REVISION,
        "extraction": EXTRACTION_REVISION,
        "engine": engine,
    }
    encoded = json.dumps(document, sort_keys=True, default=str).encode()
    return hashlib.sha256(encoded).hexdigest()[:32]
