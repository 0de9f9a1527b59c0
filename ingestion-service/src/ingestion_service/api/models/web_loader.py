"""Wire model of POST /process: Open WebUI's external web loader (``retrieval/loaders/external_web.py``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from ingestion_service.api.models.ingest import MAX_URL_CHARS

# Open WebUI sends its URLs in batches of 20.
MAX_URLS = 20


class WebLoaderRequest(BaseModel):
    """``{"urls": [...]}``; fields a later Open WebUI may add are ignored, not refused."""

    model_config = ConfigDict(extra="ignore")

    urls: list[Annotated[str, Field(min_length=1, max_length=MAX_URL_CHARS)]] = Field(
        min_length=1, max_length=MAX_URLS, description="http(s) URLs to fetch and extract, in the answer's order."
    )
