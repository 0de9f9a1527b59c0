"""``rag open-webui prune``: remove the chunks of files and knowledge bases Open WebUI no longer has.

Open WebUI names the tenants it uses by its own ids, which are UUIDs: ``file-<file id>`` for one
uploaded file (the fork's ingests, and the document loader's with LOADER_INDEX_UPLOADS) and
``<knowledge base id>`` for a knowledge base (the fork). A tenant of that form whose file or
knowledge base Open WebUI no longer has is an orphan. So is a document of a knowledge base Open WebUI
still has whose ``file_id`` is an Open WebUI file id (a uuid4) that the knowledge base no longer
lists: the fork sends nothing when a file leaves a knowledge base, nor for a delete while the
ingestion service is down. Every other tenant and document is left alone: memory (``user-memory-*``,
``memory-*``), names that are not an Open WebUI id (``rag ingest``/``rag sync`` tenants such as
``docs``), and documents whose id is not Open WebUI's (``rag sync`` ids are uuid5).

Nothing is removed unless all of it is known: the ingestion service's tenants must come in one
complete listing, Open WebUI's files and knowledge bases in complete listings read with an admin's
token, and each orphan is asked for once more by id (an admin reads any file or knowledge base by id)
before the first delete (a knowledge base's file listing is read twice, and must agree). The
service's tenants and the live knowledge bases' documents are listed first, so a file uploaded or
added meanwhile is not among them. Deletes go through ``DELETE /api/v1/documents/{file_id}?collection_name=<tenant>``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import httpx
from rich.console import Console
from rich.markup import escape

from ingestion_service.api.models import CollectionEntry, DocumentView
from rag_cli.client import RequestFailedError, collections_page, delete_document, list_documents
from rag_cli.config import Endpoint
from rag_cli.open_webui import OpenWebUI, OpenWebUIError
from shared_contract.schema import FILE_COLLECTION_PREFIX

# The most tenants GET /api/v1/collections lists at once; more is refused rather than pruned in part.
TENANT_LIMIT = 10_000
PRUNE_TIMEOUT = httpx.Timeout(60.0, connect=10.0)

TenantKind = Literal["file", "knowledge_base"]


class PruneError(Exception):
    """Why nothing was removed."""


@dataclass(frozen=True, slots=True)
class OpenWebUITenant:
    """A tenant named by an Open WebUI id, with what it holds."""

    name: str
    kind: TenantKind
    open_webui_id: str
    documents: int
    chunks: int


@dataclass(frozen=True, slots=True)
class OrphanDocument:
    """A document of a knowledge base Open WebUI still has, whose file that knowledge base no longer lists."""

    tenant: str
    file_id: str
    name: str | None
    chunks: int


@dataclass(frozen=True, slots=True)
class Orphans:
    """What prune removes: whole tenants, and documents of live knowledge bases."""

    tenants: list[OpenWebUITenant]
    documents: list[OrphanDocument]


def _is_open_webui_id(value: str) -> bool:
    # Open WebUI's ids are str(uuid4()): lower-case, hyphenated.
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


def _is_open_webui_file_id(value: str) -> bool:
    # Only a uuid4 can be Open WebUI's: `rag sync` names its documents by uuid5.
    return _is_open_webui_id(value) and uuid.UUID(value).version == 4


def open_webui_tenants(entries: Iterable[CollectionEntry]) -> list[OpenWebUITenant]:
    """The tenants Open WebUI named: ``file-<id>`` and a knowledge base's ``<id>``; memory tenants never."""
    found: list[OpenWebUITenant] = []
    for entry in entries:
        kind: TenantKind
        if entry.kind == "file":
            kind, open_webui_id = "file", entry.name.removeprefix(FILE_COLLECTION_PREFIX)
        elif entry.kind == "knowledge_base":
            kind, open_webui_id = "knowledge_base", entry.name
        else:
            continue
        if _is_open_webui_id(open_webui_id):
            found.append(OpenWebUITenant(entry.name, kind, open_webui_id, entry.documents, entry.chunks))
    return found


def orphans(
    tenants: Iterable[OpenWebUITenant], *, file_ids: set[str], knowledge_base_ids: set[str]
) -> list[OpenWebUITenant]:
    """The tenants whose file or knowledge base is not in Open WebUI's listings."""
    return [
        tenant
        for tenant in tenants
        if tenant.open_webui_id not in (file_ids if tenant.kind == "file" else knowledge_base_ids)
    ]


async def _knowledge_base_documents(
    client: httpx.AsyncClient, ingestion: Endpoint, tenants: Iterable[OpenWebUITenant]
) -> dict[str, list[DocumentView]]:
    """Each knowledge-base tenant's documents whose file id may be Open WebUI's, by tenant."""
    found: dict[str, list[DocumentView]] = {}
    for tenant in tenants:
        if tenant.kind != "knowledge_base":
            continue
        documents = await list_documents(client, ingestion, collection=tenant.name)
        found[tenant.name] = [document for document in documents if _is_open_webui_file_id(document.file_id)]
    return found


async def _orphan_documents(
    open_webui: OpenWebUI, live: Iterable[OpenWebUITenant], documents: dict[str, list[DocumentView]]
) -> list[OrphanDocument]:
    """The documents of live knowledge bases whose files those knowledge bases no longer list."""
    found: list[OrphanDocument] = []
    for tenant in live:
        candidates = documents.get(tenant.name) or []
        if not candidates:
            continue
        listed = await open_webui.knowledge_base_file_ids(tenant.open_webui_id)
        gone = [document for document in candidates if document.file_id not in listed]
        if gone and await open_webui.knowledge_base_file_ids(tenant.open_webui_id) != listed:
            raise PruneError(f"knowledge base {tenant.open_webui_id}'s files changed while they were read")
        found.extend(OrphanDocument(tenant.name, doc.file_id, doc.name, doc.chunks) for doc in gone)
    return found


async def _find_orphans(client: httpx.AsyncClient, ingestion: Endpoint, open_webui: OpenWebUI) -> Orphans:
    try:
        listing = await collections_page(client, ingestion, include_all=True, limit=TENANT_LIMIT)
        if not listing.complete:
            raise PruneError(
                f"the ingestion service holds more than {TENANT_LIMIT} tenants; one listing must hold them all"
            )
        tenants = open_webui_tenants(listing.collections)
        documents = await _knowledge_base_documents(client, ingestion, tenants)
    except (RequestFailedError, httpx.HTTPError) as exc:
        raise PruneError(f"the ingestion service's tenants could not be listed: {exc}") from exc
    try:
        await open_webui.check_admin()
        file_ids = await open_webui.file_ids()
        knowledge_base_ids = await open_webui.knowledge_base_ids()
        found = orphans(tenants, file_ids=file_ids, knowledge_base_ids=knowledge_base_ids)
        for tenant in found:
            present = (
                await open_webui.has_file(tenant.open_webui_id)
                if tenant.kind == "file"
                else await open_webui.has_knowledge_base(tenant.open_webui_id)
            )
            if present:
                raise PruneError(
                    f"Open WebUI has {tenant.kind.replace('_', ' ')} {tenant.open_webui_id}, which its listing left "
                    "out: the listing is partial (is BYPASS_ADMIN_ACCESS_CONTROL false?)"
                )
        live = [tenant for tenant in tenants if tenant.kind == "knowledge_base" and tenant not in found]
        left_out = await _orphan_documents(open_webui, live, documents)
    except OpenWebUIError as exc:
        raise PruneError(str(exc)) from exc
    return Orphans(tenants=found, documents=left_out)


async def _remove(client: httpx.AsyncClient, ingestion: Endpoint, tenant: OpenWebUITenant) -> int:
    """Every document of ``tenant``, deleted from that tenant only; the chunks removed."""
    removed = 0
    for document in await list_documents(client, ingestion, collection=tenant.name):
        removed += await delete_document(client, ingestion, document.file_id, collection=tenant.name)
    return removed


def _report(
    console: Console,
    rows: Sequence[tuple[OpenWebUITenant, int]],
    documents: Sequence[OrphanDocument],
    *,
    dry_run: bool,
) -> None:
    """One line per tenant and per document, never wrapped (a name is copied from here)."""
    verb = "would remove" if dry_run else "removed"
    for tenant, chunks in rows:
        gone = "file" if tenant.kind == "file" else "knowledge base"
        console.print(
            f"{verb} {escape(tenant.name)} (Open WebUI has no {gone} {escape(tenant.open_webui_id)}): "
            f"{tenant.documents} documents, {chunks} chunks",
            soft_wrap=True,
        )
    for document in documents:
        console.print(
            f"{verb} {escape(document.file_id)} ({escape(document.name or '?')}) from {escape(document.tenant)} "
            f"(the knowledge base no longer lists it): {document.chunks} chunks",
            soft_wrap=True,
        )


async def prune(
    ingestion: Endpoint,
    open_webui: Endpoint,
    *,
    dry_run: bool,
    console: Console,
    transport: httpx.AsyncBaseTransport | None = None,
) -> int:
    """Find the orphans, remove them (``dry_run``: only show them); 0 when done, 1 when anything failed."""
    async with httpx.AsyncClient(timeout=PRUNE_TIMEOUT, transport=transport) as client:
        try:
            found = await _find_orphans(client, ingestion, OpenWebUI(client, open_webui))
        except PruneError as exc:
            console.print(f"[red]rag open-webui prune: {escape(str(exc))}; nothing was removed[/red]", soft_wrap=True)
            return 1
        if dry_run:
            _report(console, [(tenant, tenant.chunks) for tenant in found.tenants], found.documents, dry_run=True)
            console.print(
                f"{len(found.tenants)} tenants and {len(found.documents)} documents would be removed "
                "(dry run: nothing was removed)"
            )
            return 0
        removed: list[tuple[OpenWebUITenant, int]] = []
        removed_documents: list[OrphanDocument] = []
        failure: str | None = None
        try:
            for tenant in found.tenants:
                failure = f"removing {tenant.name} failed"
                removed.append((tenant, await _remove(client, ingestion, tenant)))
            for document in found.documents:
                failure = f"removing {document.file_id} from {document.tenant} failed"
                await delete_document(client, ingestion, document.file_id, collection=document.tenant)
                removed_documents.append(document)
            failure = None
        except (RequestFailedError, httpx.HTTPError) as exc:
            failure = f"{failure}: {exc}"
    _report(console, removed, removed_documents, dry_run=False)
    chunks = sum(count for _, count in removed) + sum(document.chunks for document in removed_documents)
    console.print(f"{len(removed)} tenants and {len(removed_documents)} documents removed, {chunks} chunks")
    if failure is not None:
        console.print(f"[red]rag open-webui prune: {escape(failure)}; run it again for the rest[/red]", soft_wrap=True)
        return 1
    return 0


def run_prune(ingestion: Endpoint, open_webui: Endpoint, *, dry_run: bool, console: Console | None = None) -> int:
    """Entry point of ``rag open-webui prune``."""
    console = console or Console()
    try:
        return asyncio.run(prune(ingestion, open_webui, dry_run=dry_run, console=console))
    except KeyboardInterrupt:
        console.print("[yellow]rag open-webui prune: interrupted (what was removed stays removed)[/yellow]")
        return 130
