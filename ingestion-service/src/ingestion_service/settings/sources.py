"""Sources the server keeps in step (``ingestion_service.sources``): which folders it may read and how
far a website is crawled."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from shared_contract.settings import Fingerprint, SettingsGroup


class SourceSettings(SettingsGroup):
    """The limits of ``POST /api/v1/sources``."""

    # Sources kept in step by the server.
    source_folder_roots: Annotated[str, Fingerprint.OPERATIONAL] = Field(
        default="",
        description="Comma-separated absolute folders under which folder and file:// sources may lie "
        "(the server reads them); empty = folder and file:// sources are refused.",
    )
    source_max_pages: Annotated[int, Fingerprint.OPERATIONAL] = Field(
        default=200, ge=1, le=10_000, description="Pages one website source holds at most (its max_pages' ceiling)."
    )
    source_max_depth: Annotated[int, Fingerprint.OPERATIONAL] = Field(
        default=3,
        ge=0,
        le=20,
        description="Link depth a website without a sitemap is crawled to (max_depth's ceiling).",
    )
    source_max_items: Annotated[int, Fingerprint.OPERATIONAL] = Field(
        default=10_000, ge=1, le=1_000_000, description="Files one folder or S3 source holds at most."
    )

    @property
    def folder_roots(self) -> tuple[Path, ...]:
        """SOURCE_FOLDER_ROOTS resolved (symlinks followed, as a source's own path is)."""
        return tuple(Path(part.strip()).resolve() for part in self.source_folder_roots.split(",") if part.strip())
