"""``vision-llm``: the pages as images, transcribed by a vision LLM in one chat-completions call.

Office documents become PDF through Gotenberg (GOTENBERG_URL); PDFs are rasterized locally with
PDFium at VISION_LLM_DPI; images are re-encoded as PNG (every page of a multi-page TIFF). At most
VISION_LLM_MAX_PAGES pages are sent: a longer document is transcribed from its first pages only and
the Document says so (``meta.pages_truncated=True``, ``meta.total_pages``), it does not fail.

The model is called through the LiteLLM SDK. A bare VISION_LLM_MODEL (or one whose prefix is not a
LiteLLM provider, such as ``google/gemma-3``) goes to the OpenAI-compatible endpoint
VISION_LLM_API_BASE_URL through an OpenAI client we build, so the connect/read timeouts and
VISION_LLM_TLS_VERIFY apply exactly; a provider-prefixed name (``anthropic/...``, ``gemini/...``) goes
to that provider with ``ssl_verify`` and the timeout (LiteLLM applies only the read timeout to
providers whose clients take no ``httpx.Timeout``). An answer cut at VISION_LLM_MAX_TOKENS fails the
extraction rather than indexing a truncated transcription.
"""

from __future__ import annotations

import base64
import mimetypes
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from haystack import Document

from ingestion_service.adapters.gotenberg import GotenbergClient, GotenbergError
from ingestion_service.documents import _errors
from ingestion_service.documents.base import SourceFile
from ingestion_service.documents.rendering import RenderedPages, image_pages, render_pdf_pages
from ingestion_service.documents.vision_profiles import PROFILES, prompt_for
from ingestion_service.errors import InvalidRequestError
from ingestion_service.settings import Settings
from rag_runtime.llm import LLMEndpoint, Route, import_litellm, litellm_arguments, names_provider, provider_names, route
from shared_contract.redact import redact_secrets, redact_url

if TYPE_CHECKING:
    import httpx2
    import openai

ENGINE = "vision-llm"
OFFICE_SUFFIXES = frozenset(
    {
        ".doc", ".docx", ".docm", ".dot", ".dotx", ".dotm", ".odt", ".ott", ".fodt", ".rtf", ".wpd",
        ".xls", ".xlsx", ".xlsm", ".xlsb", ".xlt", ".xltx", ".ods", ".ots", ".fods",
        ".ppt", ".pptx", ".pptm", ".pps", ".ppsx", ".pot", ".potx", ".odp", ".otp", ".fodp",
        ".odg", ".otg", ".vsd", ".vsdx", ".pub",
    }
)  # fmt: skip
IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".jpe", ".tif", ".tiff", ".gif", ".webp", ".bmp"})
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/tiff", "image/gif", "image/webp", "image/bmp"})
# The key the OpenAI client sends when none is configured: local servers (vLLM) accept any, and an
# explicit value keeps the SDK from picking up OPENAI_API_KEY from the environment for our endpoint.
_NO_KEY = "not-set"
_WRAPPING_FENCE = re.compile(r"\A```(?:markdown|md)[ \t]*\n(?P<body>.*?)\n?```\Z", re.DOTALL | re.IGNORECASE)
_ERROR_SNIPPET = 300


class VisionLlmConverter:
    """Renders pages and asks the vision model for Markdown; one Document per document."""

    name = ENGINE
    profiles: frozenset[str] = PROFILES

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        # LiteLLM takes httpx's Timeout (it passes it on per request; the SDK converts it).
        self._llm = LLMEndpoint.of(
            settings.vision_llm_model,
            settings.vision_llm_api_base_url,
            settings.vision_llm_api_key,
            timeout=httpx.Timeout(settings.vision_llm_read_timeout, connect=settings.vision_llm_connect_timeout),
            no_key=_NO_KEY,
        )
        self._litellm = import_litellm()
        self._route, self._endpoint = self._routed(self._llm)
        self._http: httpx2.Client | None = None
        self._openai: openai.OpenAI | None = None
        if self._route is not None and self._route.openai_compatible:
            import httpx2
            import openai

            # The OpenAI SDK's own HTTP library; this client carries TLS verification and both timeouts.
            timeout = httpx2.Timeout(settings.vision_llm_read_timeout, connect=settings.vision_llm_connect_timeout)
            self._http = httpx2.Client(verify=settings.vision_llm_tls_verify, timeout=timeout)
            # max_retries=0: a failed call is reported at once; the caller decides about retrying.
            self._openai = openai.OpenAI(
                api_key=self._llm.sent_key,
                base_url=self._llm.base_url,
                http_client=self._http,
                timeout=timeout,
                max_retries=0,
            )
        self._gotenberg = GotenbergClient(settings) if settings.gotenberg_url else None

    def _routed(self, llm: LLMEndpoint) -> tuple[Route | None, str]:
        """(LiteLLM's route, None when unconfigured; the endpoint as errors name it). The OpenAI path
        (``openai/<name>``, :func:`rag_runtime.llm.route`) is called through our own OpenAI client.

        The name is redacted: the URL may carry credentials (``http://user:pass@host``).
        """
        providers = provider_names(self._litellm)
        if llm.base_url is not None:
            return route(llm, providers), redact_url(llm.base_url)
        if names_provider(llm.model, providers):
            return route(llm, providers), f"{llm.model.partition('/')[0]} (provider default)"
        return None, "(not configured)"

    def close(self) -> None:
        """Close the HTTP clients (the registry calls it at shutdown)."""
        if self._openai is not None:
            self._openai.close()
        if self._http is not None:
            self._http.close()
        if self._gotenberg is not None:
            self._gotenberg.close()

    def convert(self, source: SourceFile, *, profile: str | None = None) -> list[Document]:
        chosen = self._check_profile(profile)
        self._check_configured()
        pages = self.render(source)
        content = self.describe_pages(pages.images, profile=chosen)
        if not content.strip():
            raise _errors.needs_ocr(ENGINE, f"the vision model returned no text for {len(pages.images)} page(s)")
        meta: dict[str, Any] = {
            "vision_profile": chosen,
            "vision_model": self._settings.vision_llm_model,
            "pages": len(pages.images),
            "mime_type": source.mime_type or "application/octet-stream",
        }
        if pages.truncated:
            meta["pages_truncated"] = True
            meta["total_pages"] = pages.total_pages
        return [Document(content=content, meta=meta)]

    def render(self, source: SourceFile) -> RenderedPages:
        """The pages of ``source`` as PNG images (office formats through Gotenberg first)."""
        settings = self._settings
        kind, suffix = _classify(source)
        if kind == "pdf":
            return render_pdf_pages(source.path, dpi=settings.vision_llm_dpi, max_pages=settings.vision_llm_max_pages)
        if kind == "image":
            return image_pages(source.path, settings.vision_llm_max_pages)
        if kind == "office":
            if self._gotenberg is None:
                raise _errors.dependency_fault(
                    ENGINE,
                    "Gotenberg",
                    f"is needed for office formats ({suffix}) with the vision engines but is not configured",
                    setting="GOTENBERG_URL",
                )
            upload_name = f"{Path(source.filename).stem or 'document'}{suffix}"
            try:
                pdf = self._gotenberg.to_pdf(source.path, upload_name)
            except GotenbergError:
                raise
            return render_pdf_pages(pdf, dpi=settings.vision_llm_dpi, max_pages=settings.vision_llm_max_pages)
        raise _errors.unsupported(ENGINE, f"cannot render {source.mime_type or suffix or 'this file'} as pages")

    def describe_pages(self, pages: list[bytes], *, profile: str, extra_context: str | None = None) -> str:
        """The model's answer (Markdown, an outer ```markdown fence removed) for PNG ``pages``.

        ``extra_context`` is appended to the profile's prompt (the verbatim labels of a diagram).
        All pages go in one call. Raises ExtractionError naming the endpoint on any failure, and
        when the answer was cut at VISION_LLM_MAX_TOKENS.
        """
        chosen = self._check_profile(profile)
        model = self._check_configured()
        if not pages:
            raise ValueError("describe_pages needs at least one page")
        prompt = prompt_for(chosen, self._settings.vision_llm_language_hint)
        if extra_context:
            prompt = f"{prompt}\n\n{extra_context}"
        content: list[dict[str, Any]] = [{"type": "text", "text": prompt}]
        content.extend(
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(page).decode()}}
            for page in pages
        )
        response = self._complete(model, [{"role": "user", "content": content}])
        return _answer(response, self._endpoint, self._settings.vision_llm_max_tokens)

    def _check_profile(self, profile: str | None) -> str:
        chosen = profile or self._settings.vision_llm_profile
        if chosen not in PROFILES:
            known = ", ".join(sorted(PROFILES))
            raise InvalidRequestError(f"Unknown vision profile {chosen!r}; known profiles: {known}.")
        return chosen

    def _check_configured(self) -> Route:
        if self._route is None:
            raise _errors.dependency_fault(
                ENGINE,
                "the vision endpoint",
                "is not configured (a model without a provider prefix needs VISION_LLM_API_BASE_URL)",
                setting="VISION_LLM_API_BASE_URL and VISION_LLM_MODEL",
            )
        return self._route

    def _complete(self, target: Route, messages: list[dict[str, Any]]) -> Any:
        import openai

        settings = self._settings
        kwargs: dict[str, Any] = {
            **litellm_arguments(target, self._llm.timeout),
            "messages": messages,
            "max_tokens": settings.vision_llm_max_tokens,
            "temperature": 0,
            "max_retries": 0,
            # Providers that reject temperature drop it rather than fail.
            "drop_params": True,
        }
        if self._openai is not None:
            kwargs["client"] = self._openai
        else:
            # A provider of LiteLLM's own: the configured base URL and key still apply when set.
            kwargs["ssl_verify"] = settings.vision_llm_tls_verify
            if self._llm.base_url is not None:
                kwargs["api_base"] = self._llm.base_url
            if self._llm.api_key is not None:
                kwargs["api_key"] = self._llm.api_key
        try:
            return self._litellm.completion(**kwargs)
        except openai.OpenAIError as exc:  # every LiteLLM exception derives from it
            problem, failure = self._failure(exc)
            # Not chained: the SDKs' errors repeat the request URL, credentials included; what
            # they say is in ``internal``, redacted.
            raise _errors.dependency_fault(
                ENGINE,
                "the vision endpoint",
                problem,
                setting="VISION_LLM_API_BASE_URL, VISION_LLM_API_KEY and VISION_LLM_MODEL",
                internal=f"vision endpoint {self._endpoint} {failure}",
            ) from None

    def _failure(self, exc: BaseException) -> tuple[str, str]:
        """(what the body says: a fixed phrase with the status; the same with the upstream's text,
        redacted and capped, for logs), read from the exception chain: LiteLLM reports refused
        connections and TLS failures as HTTP 500, and only the chained transport error tells them apart."""
        import httpx2
        import openai

        settings = self._settings
        chain = _chain(exc)
        if any(
            isinstance(item, (openai.APITimeoutError, httpx.TimeoutException, httpx2.TimeoutException, TimeoutError))
            for item in chain
        ):
            timed_out = (
                f"timed out (VISION_LLM_CONNECT_TIMEOUT {settings.vision_llm_connect_timeout:g} s, "
                f"VISION_LLM_READ_TIMEOUT {settings.vision_llm_read_timeout:g} s)"
            )
            return timed_out, timed_out
        if any(
            isinstance(item, (openai.APIConnectionError, httpx.TransportError, httpx2.TransportError, OSError))
            for item in chain
        ):
            return "is unreachable", f"is unreachable ({type(chain[-1]).__name__}: {_short(chain[-1])})"
        status = getattr(exc, "status_code", None)
        if status == 401:
            rejected = "rejected the API key (HTTP 401; check VISION_LLM_API_KEY)"
            return rejected, f"{rejected}: {_short(exc)}"
        if isinstance(status, int):
            return f"answered HTTP {status}", f"answered HTTP {status}: {_short(exc)}"
        return "failed", f"failed: {_short(exc)}"


def _classify(source: SourceFile) -> tuple[str, str]:
    """("pdf" | "image" | "office" | "other", the suffix to name it by)."""
    with source.path.open("rb") as handle:
        head = handle.read(1024)
    mime = source.mime_type or ""
    suffixes = [suffix for suffix in (source.path.suffix.lower(), Path(source.filename).suffix.lower()) if suffix]
    # The content decides where it is recognisable; the name only for formats without a signature here.
    if b"%PDF-" in head or mime == "application/pdf":
        return "pdf", ".pdf"
    if mime in _IMAGE_TYPES or any(suffix in IMAGE_SUFFIXES for suffix in suffixes):
        return "image", next((suffix for suffix in suffixes if suffix in IMAGE_SUFFIXES), "")
    office = next((suffix for suffix in suffixes if suffix in OFFICE_SUFFIXES), None)
    if office is None and mime:
        guessed = mimetypes.guess_extension(mime)
        office = guessed if guessed in OFFICE_SUFFIXES else None
    if office is not None:
        return "office", office
    return "other", suffixes[0] if suffixes else ""


def _answer(response: Any, endpoint: str, max_tokens: int) -> str:
    """The text of the first choice; a cut-off or malformed answer is an ExtractionError."""
    choices = getattr(response, "choices", None) or []
    if not choices:
        raise _errors.dependency_fault(
            ENGINE,
            "the vision endpoint",
            "answered without choices",
            setting="VISION_LLM_MODEL",
            internal=f"vision endpoint {endpoint} answered without choices",
        )
    choice = choices[0]
    if choice.finish_reason == "length":
        raise _errors.dependency_fault(
            ENGINE,
            "the vision model",
            f"answer was cut off at VISION_LLM_MAX_TOKENS ({max_tokens}); raise it or send fewer pages",
            setting="VISION_LLM_MAX_TOKENS or VISION_LLM_MAX_PAGES",
        )
    return _strip_wrapping_fence((choice.message.content or "").strip())


def _strip_wrapping_fence(text: str) -> str:
    """``text`` without an outer ```markdown fence, when the fence wraps the whole answer.

    Fences inside must pair up, or the "outer" fences belong to different blocks and stay.
    """
    match = _WRAPPING_FENCE.match(text)
    if match is None:
        return text
    body = match.group("body")
    inside_block = False
    for line in body.splitlines():
        stripped = line.strip()
        if not stripped.startswith("```"):
            continue
        # Any fence opens a block; only a bare fence closes one.
        if not inside_block or stripped == "```":
            inside_block = not inside_block
    return text if inside_block else body.strip()


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from, outermost first."""
    chain = [exc]
    while (inner := chain[-1].__cause__ or chain[-1].__context__) is not None and inner not in chain:
        chain.append(inner)
    return chain


def _short(exc: BaseException) -> str:
    """``exc``'s text for logs: upstream errors echo URLs and authorization headers, so redacted
    (before the cut, which could leave a key too short to be recognised)."""
    return redact_secrets(" ".join(str(exc).split()))[:_ERROR_SNIPPET]
