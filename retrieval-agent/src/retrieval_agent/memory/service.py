"""Long-term memory of each user: the folder of Markdown facts (the truth), its index (for recall) and
the reconciliation that keeps it current from chat turns.

A chat turn first **recalls**: it waits for the user's earlier reconciliations, picks up hand edits
(commits them as ``EDIT`` and re-indexes the changed files) and ranks the facts for the turn. Then it
schedules the **reconciliation** of the user's new message in the background, so the answer never
waits for the two extra model calls; the next turn (or a read of the memory API) waits for it.
Everything one user changes runs under that user's lock, in order.

A change is stored once its commit is (:class:`FactRepository`); indexing it comes after and is not
part of it: when that fails (Qdrant or the embedder down, a full disk) the change still answers as
stored, and the next look at the folder indexes it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from retrieval_agent.adapters.git import Commit
from retrieval_agent.adapters.llm_failures import log_failure_detail, model_failure
from retrieval_agent.errors import FactNotFoundError, MemoryStorageError
from retrieval_agent.memory.facts import Fact
from retrieval_agent.memory.index import MemoryIndex, RankedFact
from retrieval_agent.memory.reconcile import (
    ExistingFact,
    MalformedDecisionError,
    MemoryOperation,
    ReconcileError,
    Reconciler,
)
from retrieval_agent.memory.repository import FactListing, FactRepository, Signature
from retrieval_agent.metrics import SearchMetrics
from retrieval_agent.settings import Settings
from shared_contract import ContractError

logger = logging.getLogger(__name__)

ReconcileOutcome = Literal["applied", "no_facts", "no_change", "malformed", "model_error", "error"]
API_REASON = "written through the memory API"


def _failure(exc: ReconcileError) -> str:
    """What failed, fit for a WARNING: the error's type and the model error's type and HTTP status.

    Not the text: it carries the upstream's error body or the model's output (the user's words).
    """
    cause = exc.__cause__
    return type(exc).__name__ if cause is None else f"{type(exc).__name__} from {model_failure(cause)}"


@dataclass(frozen=True, slots=True)
class Speaker:
    """Who a chat turn's memory belongs to, and where the turn happened (recorded on new facts)."""

    user: str
    conversation_id: str | None = None
    message_id: str | None = None


class MemoryService:
    """One per app (ENABLE_MEMORY=true). ``reconciler`` None: facts are only recalled and edited by hand
    or through the API (no chat model is configured)."""

    def __init__(
        self,
        settings: Settings,
        *,
        repository: FactRepository,
        index: MemoryIndex,
        reconciler: Reconciler | None,
        metrics: SearchMetrics,
    ) -> None:
        self.settings = settings
        self.repository = repository
        self.index = index
        self.reconciler = reconciler
        self.metrics = metrics
        self._locks: dict[str, asyncio.Lock] = {}
        self._pending: dict[str, asyncio.Task[None]] = {}
        self._indexed: dict[str, Signature] = {}

    def _lock(self, user: str) -> asyncio.Lock:
        return self._locks.setdefault(user, asyncio.Lock())

    async def aclose(self) -> None:
        """Let running reconciliations finish (each is bounded by MEMORY_TIMEOUT)."""
        pending = list(self._pending.values())
        if pending:
            await asyncio.wait(pending, timeout=self.settings.memory_timeout)
        for task in pending:
            task.cancel()

    # -- keeping the index true to the folder ----------------------------------------------------

    async def _refresh(self, user: str) -> None:
        """Under the user's lock: commit hand edits and re-index what changed since the last look."""
        signature = await self.repository.signature(user)
        if self._indexed.get(user) == signature:
            return
        edited = await self.repository.commit_hand_edits(user)
        if edited:
            logger.info("memory: picked up hand edits of %d file(s) for one user", len(edited))
        listing = await self.repository.facts(user)
        for problem in listing.unreadable:
            logger.warning(
                "memory: %s is not a readable fact and is not recalled: %s", problem.file_name, problem.problem
            )
            if problem.refused is not None:
                self.metrics.memory_files_refused.labels(reason=problem.refused).inc()
        result = await self.index.sync(user, listing.facts)
        if result.added or result.updated or result.removed:
            self.metrics.memory_index_changes.inc(result.added + result.updated + result.removed)
        self._indexed[user] = signature

    async def _refresh_after_change(self, user: str) -> None:
        """:meth:`_refresh` once a change is committed: its failure is logged, not raised, since the change
        is stored either way (the index is not updated until the next refresh, which retries)."""
        try:
            await self._refresh(user)
        except (ContractError, MemoryStorageError) as exc:
            logger.warning("memory: a change is stored; indexing it failed and is retried on the next turn: %s", exc)

    async def settle(self, user: str) -> None:
        """Wait (at most MEMORY_TIMEOUT) for the user's scheduled reconciliations."""
        task = self._pending.get(user)
        if task is not None and not task.done():
            await asyncio.wait([task], timeout=self.settings.memory_timeout)

    # -- chat turns ------------------------------------------------------------------------------

    def _scope(self, speaker: Speaker) -> str | None:
        return speaker.conversation_id if self.settings.memory_scope == "conversation" else None

    async def recall(self, speaker: Speaker, text: str) -> list[RankedFact]:
        """The facts to show the model for this turn, best first."""
        started = time.perf_counter()
        await self.settle(speaker.user)
        async with self._lock(speaker.user):
            await self._refresh(speaker.user)
        facts = await self.index.search(
            speaker.user, text, k=self.settings.memory_context_k, conversation_id=self._scope(speaker)
        )
        self.metrics.memory_recall_duration.observe(time.perf_counter() - started)
        return facts

    def remember(self, speaker: Speaker, message: str, *, context: Sequence[str] = ()) -> None:
        """Schedule the reconciliation of the user's ``message`` (after the user's earlier ones)."""
        if self.reconciler is None or not message.strip():
            return
        previous = self._pending.get(speaker.user)
        task = asyncio.create_task(self._reconcile(previous, speaker, message, list(context)))
        self._pending[speaker.user] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self._pending.get(speaker.user) is done:
                del self._pending[speaker.user]

        task.add_done_callback(forget)

    async def _reconcile(
        self, previous: asyncio.Task[None] | None, speaker: Speaker, message: str, context: list[str]
    ) -> None:
        if previous is not None and not previous.done():
            await asyncio.wait([previous])
        started = time.perf_counter()
        outcome: ReconcileOutcome = "error"
        try:
            async with self._lock(speaker.user):
                outcome = await self._reconcile_locked(speaker, message, context)
        except MalformedDecisionError as exc:
            outcome = "malformed"
            logger.warning("memory: the model's decision was refused, nothing changed: %s", _failure(exc))
            log_failure_detail(logger, "memory: refused decision", exc)
        except ReconcileError as exc:
            outcome = "model_error"
            logger.warning("memory: reconciliation skipped, the model failed: %s", _failure(exc))
            log_failure_detail(logger, "memory: model failure", exc)
        except Exception:
            # A background task has no caller to raise to: log it whole and count it.
            logger.exception("memory: reconciliation failed")
        finally:
            self.metrics.memory_reconciliations.labels(outcome=outcome).inc()
            self.metrics.memory_reconcile_duration.observe(time.perf_counter() - started)

    async def _reconcile_locked(self, speaker: Speaker, message: str, context: list[str]) -> ReconcileOutcome:
        assert self.reconciler is not None
        user = speaker.user
        await self._refresh(user)
        candidates = await self.reconciler.extract(message, context=context)
        if not candidates:
            return "no_facts"
        existing: dict[str, ExistingFact] = {}
        for candidate in candidates:
            hits = await self.index.search(
                user,
                candidate.text,
                k=self.settings.memory_candidates,
                conversation_id=self._scope(speaker),
                recency=False,
                diverse=False,
            )
            for hit in hits:
                existing.setdefault(hit.fact_id, ExistingFact(id=hit.fact_id, text=hit.text))
        operations = await self.reconciler.decide(candidates, list(existing.values()))
        applied = 0
        for operation in operations:
            applied += await self._apply(speaker, operation)
        await self._refresh_after_change(user)
        return "applied" if applied else "no_change"

    async def _apply(self, speaker: Speaker, operation: MemoryOperation) -> int:
        user = speaker.user
        try:
            if operation.action == "ADD" and operation.text:
                await self.repository.add(
                    user,
                    operation.text,
                    language=operation.language,
                    reason=operation.reason,
                    conversation_id=speaker.conversation_id,
                    source_message_id=speaker.message_id,
                )
            elif operation.action == "UPDATE" and operation.fact_id and operation.text:
                await self.repository.update(
                    user,
                    operation.fact_id,
                    operation.text,
                    language=operation.language,
                    reason=operation.reason,
                    source_message_id=speaker.message_id,
                )
            elif operation.action == "DELETE" and operation.fact_id:
                await self.repository.delete(user, operation.fact_id, reason=operation.reason)
            else:
                return 0
        except FactNotFoundError:
            # Removed by hand between the model's look and now: the person's edit wins.
            logger.info("memory: %s of a fact that no longer exists was skipped", operation.action)
            return 0
        self.metrics.memory_operations.labels(action=operation.action).inc()
        return 1

    # -- the memory API --------------------------------------------------------------------------

    async def list_facts(self, user: str) -> FactListing:
        """Every fact of the user (after the scheduled reconciliations), newest update first."""
        await self.settle(user)
        listing = await self.repository.facts(user)
        listing.facts.sort(key=lambda fact: fact.updated_at, reverse=True)
        return listing

    async def get_fact(self, user: str, fact_id: str) -> Fact:
        await self.settle(user)
        return await self.repository.get(user, fact_id)

    async def add_fact(self, user: str, text: str, *, language: str | None, conversation_id: str | None) -> Fact:
        await self.settle(user)
        async with self._lock(user):
            await self._refresh(user)
            fact = await self.repository.add(
                user, text, language=language, reason=API_REASON, conversation_id=conversation_id
            )
            await self._refresh_after_change(user)
        self.metrics.memory_operations.labels(action="ADD").inc()
        return fact

    async def update_fact(self, user: str, fact_id: str, text: str, *, language: str | None) -> Fact:
        await self.settle(user)
        async with self._lock(user):
            await self._refresh(user)
            fact = await self.repository.update(user, fact_id, text, language=language, reason=API_REASON)
            await self._refresh_after_change(user)
        self.metrics.memory_operations.labels(action="UPDATE").inc()
        return fact

    async def delete_fact(self, user: str, fact_id: str, *, reason: str | None) -> Fact:
        await self.settle(user)
        async with self._lock(user):
            await self._refresh(user)
            fact = await self.repository.delete(user, fact_id, reason=reason or API_REASON)
            await self._refresh_after_change(user)
        self.metrics.memory_operations.labels(action="DELETE").inc()
        return fact

    async def history(self, user: str, *, limit: int, fact_id: str | None = None) -> list[Commit]:
        await self.settle(user)
        return await self.repository.log(user, limit=limit, fact_id=fact_id)

    async def wipe(self, user: str) -> bool:
        """Forget the user entirely: the pending reconciliation, the folder with its history, the index."""
        self.repository.folder(user)  # validates the name before anything is cancelled
        task = self._pending.pop(user, None)
        if task is not None:
            task.cancel()
        async with self._lock(user):
            existed = await self.repository.wipe(user)
            await self.index.forget(user)
            self._indexed.pop(user, None)
        return existed
