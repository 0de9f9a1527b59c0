"""``/mcp``: the MCP server over streamable HTTP, inside the retrieval agent's app.

The route sits behind the app's edge middleware like every other non-probe path, so it takes the
same Bearer API_KEY (401 with ``WWW-Authenticate: Bearer`` otherwise) and MAX_REQUEST_BYTES.
"""

from __future__ import annotations

from fastapi import FastAPI
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import Route

from retrieval_agent.mcp.backend import app_backend
from retrieval_agent.mcp.server import build_mcp_server

MCP_PATH = "/mcp"


def mount_mcp(app: FastAPI, path: str = MCP_PATH) -> StreamableHTTPSessionManager:
    """Serve the MCP server at ``path``; the caller runs the returned manager (``async with manager.run()``)
    inside the app's lifespan, after ``app.state.search`` and ``app.state.store`` exist."""

    server = build_mcp_server(app_backend(app.state))
    # Only for the session manager it creates (``server.session_manager``): the Starlette app it
    # returns would not run its lifespan once mounted, so the route below serves the manager directly.
    server.streamable_http_app(
        # Stateless, JSON answers: every tool is a single request/response, and nothing (no session
        # table, no open SSE stream) ties a client to one process or outlives a restart.
        stateless_http=True,
        json_response=True,
        # The SDK's DNS-rebinding check would allow only localhost Host headers (it assumes a
        # loopback server); here the Bearer key guards the route, and a rebinding page cannot send it.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    manager = server.session_manager
    # POST only: stateless, the server has no stream to offer on GET and no session to end on DELETE,
    # so both are 405 (as the transport spec allows) instead of an SSE stream of pings that never ends.
    app.router.routes.append(Route(path, endpoint=StreamableHTTPASGIApp(manager), methods=["POST"]))
    return manager
