"""Reconciliation with the chat model: extract the facts a user message states, then decide what they do
to the facts already remembered (ADD, UPDATE, DELETE), as typed PydanticAI outputs.

The decision is validated before anything changes: an UPDATE or DELETE must name a fact the model was
shown, ADD and UPDATE need text, DELETE a reason, and no fact is touched twice. A decision that breaks
a rule goes back to the model once with the reason; a second bad one raises MalformedDecisionError
and the caller changes nothing. More operations than ``max_operations`` is a cap, not a malformation:
the first ``max_operations`` apply and the rest are dropped (logged).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

import anyio
from pydantic import BaseModel, Field
from pydantic_ai import Agent, ModelRetry, RunContext, ToolOutput
from pydantic_ai.exceptions import ModelAPIError, UnexpectedModelBehavior
from pydantic_ai.models import Model

from retrieval_agent.memory.limits import MAX_FACT_CHARS

logger = logging.getLogger(__name__)

EXTRACT_TOOL: Final = "record_facts"
DECIDE_TOOL: Final = "decide_memory_operations"
Action = Literal["ADD", "UPDATE", "DELETE"]

EXTRACT_INSTRUCTIONS: Final = (
    "You keep a long-term memory about one user. Read the user's newest message and list the lasting facts it "
    "states about the user: preferences, tools they use, their work and projects, people and places in their "
    "life, plans, constraints. Write each fact as one short sentence in the third person ('The user ...'), in the "
    "language of the message, with its ISO 639-1 language code. Earlier messages are given only to resolve "
    "words like 'it' or 'that'; take facts from the newest message only. Questions, greetings, thanks and "
    "requests for help that reveal nothing lasting about the user give no facts: answer with an empty list."
)
DECIDE_INSTRUCTIONS: Final = (
    "You maintain a long-term memory about one user. You get new candidate facts and the existing facts "
    "closest to them, each existing fact with a number. For each candidate choose:\n"
    "- ADD: it is new information (unrelated to every existing fact). Give its text.\n"
    "- UPDATE: it refines or contradicts an existing fact. Give that fact's number and the fact's whole new "
    "text, which replaces the old one (e.g. 'uses pip' + 'switched to poetry' -> UPDATE to 'uses poetry').\n"
    "- DELETE: an existing fact is no longer true and nothing replaces it. Give its number and the reason.\n"
    "- nothing: the candidate repeats an existing fact.\n"
    "Every operation needs a short reason. Touch each existing fact at most once."
)


class ReconcileError(Exception):
    """Reconciliation could not run to a decision; the caller changes nothing."""


class ReconcileUnavailableError(ReconcileError):
    """The model failed, refused or took longer than the timeout."""


class MalformedDecisionError(ReconcileError):
    """The model's answer broke the rules twice (after one retry with the reason)."""


class CandidateFact(BaseModel):
    """One fact the user's message states."""

    text: str = Field(min_length=1, max_length=MAX_FACT_CHARS, description="One fact, one short sentence.")
    language: str = Field(default="en", max_length=8, description="ISO 639-1 code of the text.")


class Extraction(BaseModel):
    facts: list[CandidateFact] = Field(default_factory=lambda: list[CandidateFact](), max_length=20)


class ProposedOperation(BaseModel):
    """One operation as the model writes it: existing facts by their number."""

    action: Action
    fact: int | None = Field(default=None, description="UPDATE/DELETE: the existing fact's number.")
    text: str | None = Field(default=None, max_length=MAX_FACT_CHARS, description="ADD/UPDATE: the fact's text.")
    language: str | None = Field(default=None, max_length=8, description="ADD/UPDATE: ISO 639-1 code of the text.")
    reason: str = Field(default="", max_length=500)


class ProposedDecision(BaseModel):
    operations: list[ProposedOperation] = Field(default_factory=lambda: list[ProposedOperation]())


@dataclass(frozen=True, slots=True)
class ExistingFact:
    id: str
    text: str


@dataclass(frozen=True, slots=True)
class MemoryOperation:
    """One validated operation, with the fact's real id."""

    action: Action
    fact_id: str | None
    text: str | None
    language: str | None
    reason: str


def _problems(decision: ProposedDecision, shown: int) -> list[str]:
    problems: list[str] = []
    touched: set[int] = set()
    for position, operation in enumerate(decision.operations, start=1):
        where = f"operation {position} ({operation.action})"
        if operation.action in ("UPDATE", "DELETE"):
            if operation.fact is None or not 1 <= operation.fact <= shown:
                problems.append(
                    f"{where} must name one of the existing facts 1-{shown}"
                    if shown
                    else f"{where}: there are no existing facts; use ADD"
                )
            elif operation.fact in touched:
                problems.append(f"{where} touches fact {operation.fact} a second time")
            else:
                touched.add(operation.fact)
        if operation.action in ("ADD", "UPDATE") and not (operation.text or "").strip():
            problems.append(f"{where} needs the fact's text")
        if operation.action == "DELETE" and not operation.reason.strip():
            problems.append(f"{where} needs a reason")
    return problems


def _numbered(existing: Sequence[ExistingFact]) -> str:
    if not existing:
        return "(none)"
    return "\n".join(f"{number}. {fact.text}" for number, fact in enumerate(existing, start=1))


class Reconciler:
    """The two model calls of one turn's reconciliation, each bounded by ``timeout`` seconds."""

    def __init__(self, model: Model, *, max_operations: int, timeout: float) -> None:
        self.max_operations = max_operations
        self.timeout = timeout
        self._extractor: Agent[None, Extraction] = Agent(
            model,
            output_type=ToolOutput(Extraction, name=EXTRACT_TOOL, max_retries=1),
            instructions=EXTRACT_INSTRUCTIONS,
        )
        self._decider: Agent[int, ProposedDecision] = Agent(
            model,
            deps_type=int,
            output_type=ToolOutput(ProposedDecision, name=DECIDE_TOOL, max_retries=1),
            instructions=DECIDE_INSTRUCTIONS,
        )

        @self._decider.output_validator
        def _validate(context: RunContext[int], decision: ProposedDecision) -> ProposedDecision:
            problems = _problems(decision, context.deps)
            if problems:
                raise ModelRetry("Fix these and answer again: " + "; ".join(problems) + ".")
            return decision

    async def extract(self, message: str, *, context: Sequence[str] = ()) -> list[CandidateFact]:
        """The facts ``message`` states about the user (``context``: earlier user messages, oldest first)."""
        earlier = "\n".join(f"- {text}" for text in context if text.strip())
        prompt = (f"Earlier messages:\n{earlier}\n\n" if earlier else "") + f"Newest message:\n{message}"
        try:
            with anyio.fail_after(self.timeout):
                result = await self._extractor.run(prompt)
        except TimeoutError as exc:
            raise ReconcileUnavailableError(f"fact extraction took longer than {self.timeout:g} s") from exc
        except ModelAPIError as exc:
            raise ReconcileUnavailableError(f"fact extraction failed: {exc}") from exc
        except UnexpectedModelBehavior as exc:
            raise MalformedDecisionError(f"the extracted facts were malformed twice: {exc}") from exc
        return [fact for fact in result.output.facts if fact.text.strip()]

    async def decide(
        self, candidates: Sequence[CandidateFact], existing: Sequence[ExistingFact]
    ) -> list[MemoryOperation]:
        """The validated operations for ``candidates`` against ``existing`` (at most ``max_operations``)."""
        # Existing facts are shown by number, not UUID: small models copy "2" reliably, a UUID not always.
        prompt = (
            "Existing facts:\n"
            + _numbered(existing)
            + "\n\nNew candidate facts:\n"
            + "\n".join(f"- {fact.text} (language: {fact.language})" for fact in candidates)
        )
        try:
            with anyio.fail_after(self.timeout):
                result = await self._decider.run(prompt, deps=len(existing))
        except TimeoutError as exc:
            raise ReconcileUnavailableError(f"the memory decision took longer than {self.timeout:g} s") from exc
        except ModelAPIError as exc:
            raise ReconcileUnavailableError(f"the memory decision failed: {exc}") from exc
        except UnexpectedModelBehavior as exc:
            raise MalformedDecisionError(f"the decision broke the rules twice: {exc}") from exc
        operations = result.output.operations
        if len(operations) > self.max_operations:
            logger.warning(
                "memory: the decision had %d operations; the first %d apply (MEMORY_MAX_OPERATIONS)",
                len(operations),
                self.max_operations,
            )
            operations = operations[: self.max_operations]
        return [
            MemoryOperation(
                action=operation.action,
                fact_id=existing[operation.fact - 1].id
                if operation.fact is not None and operation.action != "ADD"
                else None,
                text=(operation.text or "").strip() or None,
                language=operation.language,
                reason=" ".join(operation.reason.split()) or "not given",
            )
            for operation in operations
        ]
