"""CORS for browser clients, with Starlette's CORSMiddleware: off unless origins are configured.

Outermost, so that a preflight (OPTIONS with Origin and Access-Control-Request-Method) is answered
before the API key is asked for: browsers send it without credentials. Requests themselves still need
the key. Credentials mode is off: the key travels in the Authorization header, never in a cookie.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from rag_runtime.http.request_id import REQUEST_ID_HEADER

# An origin as browsers send it: scheme, host, optional port; no path, not even a trailing slash.
_ORIGIN = re.compile(r"https?://[^/\s?#]+")


def cors_origins(value: str) -> list[str]:
    """A comma-separated origin list (``*`` = any origin) as a list; ValueError naming the rule broken."""
    origins = list(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))
    for origin in origins:
        if origin != "*" and not _ORIGIN.fullmatch(origin):
            raise ValueError(
                "each origin must be * or scheme://host[:port] (e.g. https://chat.example.com), without a path"
            )
    return origins


def install_cors(app: FastAPI, origins: Sequence[str], *, expose_headers: Sequence[str] = ()) -> None:
    """Add the CORS middleware to ``app`` when ``origins`` names any; call it after every other middleware."""
    if not origins:
        return
    app.add_middleware(
        CORSMiddleware,
        allow_origins=list(origins),
        allow_methods=["*"],
        allow_headers=["*"],
        expose_headers=[REQUEST_ID_HEADER, "Retry-After", *expose_headers],
    )
