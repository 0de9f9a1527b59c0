"""/api/v1/memory/{user}: read and edit one user's long-term memory (``retrieval_agent.memory``).

Every change is a Git commit in MEMORY_PATH/{user}/; a delete moves the fact to ``deleted/``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, status

from rag_runtime.http import ERROR_RESPONSES, require_json_body
from retrieval_agent.adapters.git import Commit
from retrieval_agent.api.auth import BEARER
from retrieval_agent.api.deps import MemoryDep
from retrieval_agent.api.memory_models import (
    CommitOut,
    FactCreate,
    FactList,
    FactOut,
    FactUpdate,
    MemoryLog,
    UnreadableFile,
    WipeResult,
)
from retrieval_agent.errors import MemoryDisabledError
from retrieval_agent.memory.facts import Fact
from retrieval_agent.memory.repository import Unreadable
from retrieval_agent.memory.service import MemoryService
from shared_contract.error_body import ErrorBody

router = APIRouter(
    prefix="/api/v1/memory",
    tags=["memory"],
    dependencies=[BEARER, Depends(require_json_body)],
    responses=ERROR_RESPONSES,
)

_FACT_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "FACT_NOT_FOUND: the user has no fact with this id."}
}

UserPath = Annotated[str, Path(description="The user, as chat names it (`user` field or MEMORY_USER_HEADER).")]
FactPath = Annotated[str, Path(description="The fact's id (its file is {id}.md).")]


def _enabled(memory: MemoryService | None) -> MemoryService:
    if memory is None:
        raise MemoryDisabledError("ENABLE_MEMORY is false")
    return memory


def _fact_out(user: str, fact: Fact) -> FactOut:
    folder = f"{user}/deleted" if fact.deleted_at is not None else user
    return FactOut(
        id=fact.id,
        text=fact.text,
        truncated=fact.truncated,
        created_at=fact.created_at,
        updated_at=fact.updated_at,
        conversation_id=fact.conversation_id,
        source_message_id=fact.source_message_id,
        language=fact.language,
        file=f"{folder}/{fact.file_name}",
        deleted_at=fact.deleted_at,
        deleted_reason=fact.deleted_reason,
    )


def _unreadable_file(unreadable: Unreadable) -> UnreadableFile:
    return UnreadableFile(file_name=unreadable.file_name, problem=unreadable.problem)


def _commit_out(commit: Commit) -> CommitOut:
    return CommitOut(
        sha=commit.sha,
        committed_at=commit.committed_at,
        author=commit.author,
        subject=commit.subject,
        body=commit.body,
        files=commit.files,
    )


@router.get("/{user}/facts", response_model=FactList)
async def list_facts(user: UserPath, memory: MemoryDep) -> FactList:
    """The user's facts (after the reconciliations already scheduled), and files that are not readable facts."""
    listing = await _enabled(memory).list_facts(user)
    return FactList(
        user=user,
        facts=[_fact_out(user, fact) for fact in listing.facts],
        unreadable=[_unreadable_file(item) for item in listing.unreadable],
    )


@router.post("/{user}/facts", response_model=FactOut, status_code=status.HTTP_201_CREATED)
async def create_fact(user: UserPath, body: FactCreate, memory: MemoryDep) -> FactOut:
    """Remember a fact (committed as ADD); the answer carries its new id."""
    fact = await _enabled(memory).add_fact(
        user, body.text, language=body.language, conversation_id=body.conversation_id
    )
    return _fact_out(user, fact)


@router.get("/{user}/facts/{fact_id}", response_model=FactOut, responses=_FACT_NOT_FOUND)
async def get_fact(user: UserPath, fact_id: FactPath, memory: MemoryDep) -> FactOut:
    return _fact_out(user, await _enabled(memory).get_fact(user, fact_id))


@router.put("/{user}/facts/{fact_id}", response_model=FactOut, responses=_FACT_NOT_FOUND)
async def update_fact(user: UserPath, fact_id: FactPath, body: FactUpdate, memory: MemoryDep) -> FactOut:
    """Rewrite a fact (committed as UPDATE); its id and creation time stay."""
    return _fact_out(user, await _enabled(memory).update_fact(user, fact_id, body.text, language=body.language))


@router.delete("/{user}/facts/{fact_id}", response_model=FactOut, responses=_FACT_NOT_FOUND)
async def delete_fact(
    user: UserPath,
    fact_id: FactPath,
    memory: MemoryDep,
    reason: Annotated[str | None, Query(max_length=500, description="Recorded in the file and the commit.")] = None,
) -> FactOut:
    """Forget a fact: moved to deleted/ with the reason (committed as DELETE); the moved fact."""
    return _fact_out(user, await _enabled(memory).delete_fact(user, fact_id, reason=reason))


@router.get("/{user}/log", response_model=MemoryLog)
async def memory_log(
    user: UserPath,
    memory: MemoryDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    fact_id: Annotated[str | None, Query(description="Only the commits that touched this fact.")] = None,
) -> MemoryLog:
    """The Git history of the user's memory folder, newest first."""
    commits = await _enabled(memory).history(user, limit=limit, fact_id=fact_id)
    return MemoryLog(user=user, commits=[_commit_out(commit) for commit in commits])


@router.delete("/{user}", response_model=WipeResult)
async def wipe_memory(user: UserPath, memory: MemoryDep) -> WipeResult:
    """Forget the user entirely: every fact, the folder's history and the index entries."""
    return WipeResult(user=user, wiped=await _enabled(memory).wipe(user))
