"""``python -m retrieval_agent``: serve the app with uvicorn on HOST:PORT."""

from __future__ import annotations

import sys

import uvicorn

from rag_runtime.http import configure_logging
from retrieval_agent.main import check_startup, create_app, server_config
from retrieval_agent.settings import get_settings
from shared_contract import ContractConfigError

# A configuration refused at start-up, as `rag dev` exits on one.
EXIT_CONFIG_ERROR = 2


def main() -> None:
    """Run the service; an invalid setting stops it with one line naming the variable (exit 2)."""
    try:
        settings = get_settings()
        check_startup(settings)
    except ContractConfigError as exc:
        sys.stderr.write(f"{exc}\n")
        sys.exit(EXIT_CONFIG_ERROR)
    configure_logging(settings.log_level, settings.log_format)
    uvicorn.Server(server_config(create_app(settings), settings)).run()


if __name__ == "__main__":
    main()
