"""How the service listens, authenticates and reports, and how it runs the query model."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator

from rag_runtime.embedding.query_int8 import QueryQuantization
from rag_runtime.http import LogFormat, cors_origins
from shared_contract.settings import SettingsGroup, check_api_key

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


class ServerSettings(SettingsGroup):
    """Address, auth, logs, metrics, the MCP endpoint and the body cap."""

    # Server and auth.
    api_key: SecretStr = Field(description="Bearer token Open WebUI sends; at least 32 characters.")
    host: str = "0.0.0.0"  # noqa: S104 - a container service listens on every interface
    port: int = Field(default=8000, ge=1, le=65535)
    log_level: LogLevel = "INFO"
    log_format: LogFormat = Field(default="json", description="json: one JSON object per line; text: plain lines.")
    metrics_enabled: bool = True
    enable_mcp: bool = Field(
        default=True, description="Serve the knowledge base over MCP (streamable HTTP) at /mcp, behind API_KEY."
    )
    # Open WebUI's bypass mode forwards chat turns verbatim, pasted images as base64 parts included
    # (only their text is used): a 4 MiB cap turned a pasted photo into "no sources".
    max_request_bytes: int = Field(default=32 * 1024 * 1024, gt=0, description="Request body cap of every route.")
    cors_allow_origins: str = Field(
        default="",
        description="Comma-separated origins browsers may call from (https://chat.example.com; * = any), "
        "preflights answered without the key; empty = no CORS headers.",
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _log_level(cls, value: object) -> object:
        # `rag dev --log-level info` and Python's logging take any case.
        return value.upper() if isinstance(value, str) else value

    @field_validator("api_key")
    @classmethod
    def _long_key(cls, value: SecretStr) -> SecretStr:
        return check_api_key(value)

    @field_validator("cors_allow_origins")
    @classmethod
    def _origins(cls, value: str) -> str:
        cors_origins(value)
        return value

    @property
    def cors_origin_list(self) -> list[str]:
        """CORS_ALLOW_ORIGINS as a list; empty when CORS is off."""
        return cors_origins(self.cors_allow_origins)


class QueryEmbeddingSettings(SettingsGroup):
    """How the query model runs: its ONNX threads and whether it is the int8 copy.

    QUERY_EMBEDDING_THREADS (default 1) is the query model's ONNX Runtime thread count, separate
    from EMBEDDING_THREADS: one short query gains nothing from intra-op threads, whose spinning
    workers take the cores the store's search threads need next (hybrid /search on 2 shared
    cores: p50 40 -> 24 ms). The vectors are the same for any thread count. 0 uses EMBEDDING_THREADS.
    """

    # Query embedding.
    query_embedding_threads: int = Field(
        default=1, ge=0, description="ONNX threads of the query embedding model; 0 = EMBEDDING_THREADS."
    )
    query_embedding_quantization: QueryQuantization = Field(
        default="auto",
        description="int8: queries run on an int8 copy of the fastembed dense model (~2x faster, query vectors "
        "at cosine 0.98 or more to fp32; documents keep fp32); auto: int8 for the models measured so "
        "(all-MiniLM-L6-v2), none: fp32 queries (docs/models.md).",
    )
