"""The service's configuration: the shared contract's variables plus the ingestion-only ones,
one settings class per concern, composed into :class:`Settings`.

Every variable keeps its flat name (``CHUNK_SIZE``) and is read as ``settings.chunk_size``; a
component that needs one concern can take that group's type (``ChunkingSettings``).
"""

from __future__ import annotations

from typing import Self

from pydantic import model_validator

from ingestion_service.settings.chunking import ChunkingSettings, SplitBy
from ingestion_service.settings.extraction import (
    ConcreteEngine,
    EngineSetting,
    ExtractionSettings,
    GotenbergSettings,
    OcrSettings,
    RoutingSettings,
    ScanEngine,
    VisionProfile,
    VisionSettings,
)
from ingestion_service.settings.fetch import UrlFetchSettings
from ingestion_service.settings.service import (
    DocumentLimitSettings,
    JobSettings,
    LogLevel,
    OriginalSettings,
    RequestGateSettings,
    S3Settings,
    ServerSettings,
)
from ingestion_service.settings.sources import SourceSettings
from shared_contract import ContractConfigError, ContractSettings, load_settings
from shared_contract.settings import CONTRACT_GROUPS, SettingsGroup

# The groups in the order .env.example documents them.
GROUPS: tuple[type[SettingsGroup], ...] = (
    *CONTRACT_GROUPS,
    ServerSettings,
    RequestGateSettings,
    DocumentLimitSettings,
    JobSettings,
    OriginalSettings,
    S3Settings,
    UrlFetchSettings,
    SourceSettings,
    ExtractionSettings,
    OcrSettings,
    RoutingSettings,
    VisionSettings,
    GotenbergSettings,
    ChunkingSettings,
)


# Bases from the last group to the first: pydantic lists the fields of the base furthest down the
# MRO first, so ``model_fields`` follows GROUPS.
class Settings(
    ChunkingSettings,
    GotenbergSettings,
    VisionSettings,
    RoutingSettings,
    OcrSettings,
    ExtractionSettings,
    SourceSettings,
    UrlFetchSettings,
    S3Settings,
    OriginalSettings,
    JobSettings,
    DocumentLimitSettings,
    RequestGateSettings,
    ServerSettings,
    ContractSettings,
):
    """Every ingestion-service variable. Built once per app via :func:`get_settings`."""

    @model_validator(mode="after")
    def _staging_fits_one_upload(self) -> Self:
        if self.scratch_max_bytes < self.max_upload_bytes:
            raise ContractConfigError(
                "SCRATCH_MAX_BYTES", f"must be at least MAX_UPLOAD_BYTES ({self.max_upload_bytes}) to stage one upload"
            )
        return self


def get_settings() -> Settings:
    """Settings from the environment; invalid values raise ContractConfigError naming the variable."""
    return load_settings(Settings)


__all__ = [
    "GROUPS",
    "ChunkingSettings",
    "ConcreteEngine",
    "DocumentLimitSettings",
    "EngineSetting",
    "ExtractionSettings",
    "GotenbergSettings",
    "JobSettings",
    "LogLevel",
    "OcrSettings",
    "OriginalSettings",
    "RequestGateSettings",
    "RoutingSettings",
    "S3Settings",
    "ScanEngine",
    "ServerSettings",
    "Settings",
    "SourceSettings",
    "SplitBy",
    "UrlFetchSettings",
    "VisionProfile",
    "VisionSettings",
    "get_settings",
]
