"""The wire models of /api/v1/memory: one user's facts, their history, and the edits people make.

Pure pydantic (the routes build them from the memory layer's types), so that ``rag memory`` reads the
replies with them without loading the store, the index or Git.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from retrieval_agent.memory.limits import MAX_FACT_CHARS


class FactOut(BaseModel):
    """One fact as its file holds it; ``file`` is its path under MEMORY_PATH."""

    id: str
    text: str
    truncated: bool = Field(
        default=False,
        description="The file is longer than what is read of it (72 KiB): `text` is its beginning; the file is unchanged.",
    )
    created_at: datetime
    updated_at: datetime
    conversation_id: str | None = None
    source_message_id: str | None = None
    language: str
    file: str
    deleted_at: datetime | None = None
    deleted_reason: str | None = None


class UnreadableFile(BaseModel):
    """A file in the folder that is not a readable fact (it is neither recalled nor listed as a fact)."""

    file_name: str
    problem: str


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


class MemoryLog(BaseModel):
    user: str
    commits: list[CommitOut] = Field(description="Newest first.")


class WipeResult(BaseModel):
    user: str
    wiped: bool = Field(description="False when the user had no memory.")
