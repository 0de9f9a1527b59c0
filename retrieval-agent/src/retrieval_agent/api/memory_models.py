"""The wire models of /api/v1/memory: one user's facts, their history, and the edits people make."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from retrieval_agent.adapters.git import Commit
from retrieval_agent.memory.facts import MAX_FACT_CHARS, Fact
from retrieval_agent.memory.repository import Unreadable


class FactOut(BaseModel):
    """One fact as its file holds it; ``file`` is its path under MEMORY_PATH."""

    id: str
    text: str
    created_at: datetime
    updated_at: datetime
    conversation_id: str | None = None
    source_message_id: str | None = None
    language: str
    file: str
    deleted_at: datetime | None = None
    deleted_reason: str | None = None

    @classmethod
    def of(cls, user: str, fact: Fact) -> FactOut:
        folder = f"{user}/deleted" if fact.deleted_at is not None else user
        return cls(
            id=fact.id,
            text=fact.text,
            created_at=fact.created_at,
            updated_at=fact.updated_at,
            conversation_id=fact.conversation_id,
            source_message_id=fact.source_message_id,
            language=fact.language,
            file=f"{folder}/{fact.file_name}",
            deleted_at=fact.deleted_at,
            deleted_reason=fact.deleted_reason,
        )


class UnreadableFile(BaseModel):
    """A file in the folder that is not a readable fact (it is neither recalled nor listed as a fact)."""

    file_name: str
    problem: str

    @classmethod
    def of(cls, unreadable: Unreadable) -> UnreadableFile:
        return cls(file_name=unreadable.file_name, problem=unreadable.problem)


class FactList(BaseModel):
    user: str
    facts: list[FactOut] = Field(description="Newest update first.")
    unreadable: list[UnreadableFile] = Field(default_factory=lambda: list[UnreadableFile]())


class FactCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=MAX_FACT_CHARS, description="The fact, one statement.")
    language: str | None = Field(
        default=None, max_length=8, description="ISO 639-1 code of the text (its BM25 stemmer); unset: unstemmed."
    )
    conversation_id: str | None = Field(default=None, max_length=256)


class FactUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=MAX_FACT_CHARS, description="The fact's new text (replaces it whole).")
    language: str | None = Field(default=None, max_length=8, description="Unset: the fact keeps its language.")


class CommitOut(BaseModel):
    """One commit of the user's memory folder: ADD/UPDATE/DELETE (or EDIT for hand edits) and why."""

    sha: str
    committed_at: datetime
    author: str
    subject: str
    body: str
    files: list[str]

    @classmethod
    def of(cls, commit: Commit) -> CommitOut:
        return cls(
            sha=commit.sha,
            committed_at=commit.committed_at,
            author=commit.author,
            subject=commit.subject,
            body=commit.body,
            files=commit.files,
        )


class MemoryLog(BaseModel):
    user: str
    commits: list[CommitOut] = Field(description="Newest first.")


class WipeResult(BaseModel):
    user: str
    wiped: bool = Field(description="False when the user had no memory.")
