"""``python -m ingestion_service``: serve the app with uvicorn on HOST:PORT."""

from __future__ import annotations

import logging
import os

# Haystack decides at import time whether to phone home; a self-hosted service must not
# (an explicit HAYSTACK_TELEMETRY_ENABLED still wins).
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

import uvicorn

from ingestion_service.main import create_app
from ingestion_service.settings import get_settings


def main() -> None:
    """Read settings, configure logging, run uvicorn."""
    settings = get_settings()
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level=settings.log_level.lower())


if __name__ == "__main__":
    main()
