"""``python -m retrieval_agent``: serve the app with uvicorn on HOST:PORT."""

from __future__ import annotations

import logging

import uvicorn

from retrieval_agent.main import create_app
from retrieval_agent.settings import get_settings


def main() -> None:
    """Run the service."""
    settings = get_settings()
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level=settings.log_level.lower())


if __name__ == "__main__":
    main()
