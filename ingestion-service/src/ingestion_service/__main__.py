"""``python -m ingestion_service``: serve the app with uvicorn on HOST:PORT."""

from __future__ import annotations

import os

# Haystack decides at import time whether to phone home; a self-hosted service must not
# (an explicit HAYSTACK_TELEMETRY_ENABLED still wins).
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

import uvicorn

from ingestion_service.main import create_app, server_config
from ingestion_service.settings import get_settings
from shared_contract.http import configure_logging


def main() -> None:
    """Read settings, configure logging, run uvicorn."""
    settings = get_settings()
    configure_logging(settings.log_level, settings.log_format)
    uvicorn.Server(server_config(create_app(settings), settings)).run()


if __name__ == "__main__":
    main()
