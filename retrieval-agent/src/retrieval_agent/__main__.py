"""``python -m retrieval_agent``: serve the app with uvicorn on HOST:PORT."""

from __future__ import annotations

import uvicorn

from retrieval_agent.main import create_app
from retrieval_agent.settings import get_settings
from shared_contract.http import configure_logging


def main() -> None:
    """Run the service."""
    settings = get_settings()
    configure_logging(settings.log_level, settings.log_format)
    # log_config=None: uvicorn's loggers (access lines too) go to the root handler, with request ids.
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        log_config=None,
    )


if __name__ == "__main__":
    main()
