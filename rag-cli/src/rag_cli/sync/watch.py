"""The entry points: one sync, or a watch that syncs again on every change until a signal."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Collection, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from rich.console import Console
from rich.markup import escape

from rag_cli.config import Endpoint

if TYPE_CHECKING:
    pass

from rag_cli.sync.apply import sync_once
from rag_cli.sync.listing import check_s3_endpoint
from rag_cli.sync.output import print_report
from rag_cli.sync.plan import (
    FOLDER_RETURN_POLL_S,
    INGEST_TIMEOUT,
    MAX_BATCH_MS,
    WATCH_TIMEOUT_MS,
    S3Source,
    Source,
    SourceError,
    SyncAbortedError,
    SyncOptions,
    SyncReport,
    is_hidden,
    parse_source,
)


async def _sync_with_client(
    source: Source,
    endpoint: Endpoint,
    options: SyncOptions,
    console: Console,
    transport: httpx.AsyncBaseTransport | None,
) -> SyncReport:
    async with httpx.AsyncClient(timeout=INGEST_TIMEOUT, transport=transport) as client:
        return await sync_once(source, endpoint, options, client=client, console=console)


def _relative_paths(root: Path, changes: Iterable[tuple[Any, str]]) -> set[str]:
    relatives: set[str] = set()
    for _, raw in changes:
        try:
            relative = Path(raw).relative_to(root).as_posix()
        except ValueError:
            continue
        if relative not in {"", "."} and not is_hidden(relative):
            relatives.add(relative)
    return relatives


async def _round(
    source: Source,
    endpoint: Endpoint,
    options: SyncOptions,
    *,
    client: httpx.AsyncClient,
    console: Console,
    scope: Collection[str] | None,
    quiet: bool,
) -> None:
    try:
        report = await sync_once(
            source, endpoint, options, client=client, console=console, scope=scope, transient=quiet
        )
    except SyncAbortedError as exc:
        console.print(f"[red]rag sync: {escape(str(exc))}[/red]")
        return
    if report.touched or not quiet:
        print_report(console, report, brief=quiet)


async def watch_source(
    source: Source,
    endpoint: Endpoint,
    options: SyncOptions,
    *,
    console: Console,
    debounce_ms: int = 1_500,
    interval_s: float = 60.0,
    stop: asyncio.Event | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> None:
    """A full sync, then follow the source until ``stop`` is set (or the task is cancelled: Ctrl-C).

    A folder is watched with watchfiles: changes are gathered until the folder has been quiet for
    ``debounce_ms`` and only the paths they touched are synced again. An S3 prefix is listed again
    every ``interval_s`` seconds (a full, but cheap, sync: unchanged objects are never read).
    """
    if stop is None:
        stop = asyncio.Event()
    async with httpx.AsyncClient(timeout=INGEST_TIMEOUT, transport=transport) as client:

        async def sync_round(scope: Collection[str] | None, quiet: bool) -> None:
            await _round(source, endpoint, options, client=client, console=console, scope=scope, quiet=quiet)

        if isinstance(source, S3Source):
            await sync_round(None, False)
            console.print(f"watching {escape(source.uri)} (every {interval_s:g} s; Ctrl-C stops)")
            while not stop.is_set():
                try:
                    await asyncio.wait_for(stop.wait(), timeout=interval_s)
                except TimeoutError:
                    await sync_round(None, True)
            return
        await _watch_folder(source.root, sync_round, console=console, debounce_ms=debounce_ms, stop=stop)


SyncRound = Callable[[Collection[str] | None, bool], Awaitable[None]]


async def _watch_folder(
    root: Path, sync_round: SyncRound, *, console: Console, debounce_ms: int, stop: asyncio.Event
) -> None:
    """Follow the folder until ``stop``; a folder removed (or replaced) is waited for and watched afresh."""
    while not stop.is_set():
        # Off the event loop: the folder may sit on a mount that hangs.
        if not await asyncio.to_thread(root.is_dir):
            console.print(f"[yellow]rag sync: {escape(str(root))} is not a folder now; waiting for it[/yellow]")
            while not await asyncio.to_thread(root.is_dir):
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=FOLDER_RETURN_POLL_S)
                if stop.is_set():
                    return
        await _follow_folder(root, sync_round, console=console, debounce_ms=debounce_ms, stop=stop)


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of a folder, None when there is none: a recreated folder is another one."""
    try:
        status = path.stat()
    except OSError:
        return None
    return (status.st_dev, status.st_ino)


async def _follow_folder(
    root: Path, sync_round: SyncRound, *, console: Console, debounce_ms: int, stop: asyncio.Event
) -> None:
    """A full sync, then the changed paths, until ``stop`` or until the folder is removed or replaced
    (its watcher then sees nothing more: the caller watches the new one)."""
    from watchfiles import awatch

    identity = await asyncio.to_thread(_identity, root)
    # The watcher's own event: it sets it when cancelled, which must not stop the whole watch.
    watcher_stop = asyncio.Event()
    relay = asyncio.ensure_future(stop.wait())
    relay.add_done_callback(lambda _: watcher_stop.set())
    changes = awatch(
        root,
        # The root itself too: removing an empty folder reports nothing else.
        watch_filter=lambda _change, path: path == str(root) or bool(_relative_paths(root, [(None, path)])),
        # The watcher groups changes until none came for `step` ms: that is the quiet period.
        step=debounce_ms,
        debounce=max(MAX_BATCH_MS, 2 * debounce_ms),
        rust_timeout=WATCH_TIMEOUT_MS,
        stop_event=watcher_stop,
    )
    # The watcher starts before the full sync reads the folder, so a file written after that
    # read is a change it reports (it keeps what happens until it is first asked). Started
    # after the sync, it missed a file written in between until something else changed.
    following = asyncio.ensure_future(anext(changes))
    await asyncio.sleep(0)  # the step that registers the watcher's paths
    try:
        await sync_round(None, False)
        console.print(f"watching {escape(str(root))} (quiet period {debounce_ms} ms; Ctrl-C stops)")
        while True:
            try:
                batch = await following
            except StopAsyncIteration:  # the stop event ended the watcher
                return
            # The root's own event is its removal (or a new one in its place, which may even reuse the inode).
            if any(path == str(root) for _, path in batch) or await asyncio.to_thread(_identity, root) != identity:
                return
            scope = _relative_paths(root, batch)
            if scope:
                await sync_round(scope, True)
            following = asyncio.ensure_future(anext(changes))
    finally:
        relay.cancel()
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
            await following
        await changes.aclose()


# Signals that end a watch: Ctrl-C, and what `docker stop` / Kubernetes send.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


async def watch_until_signalled(
    source: Source,
    endpoint: Endpoint,
    options: SyncOptions,
    *,
    console: Console,
    debounce_ms: int = 1_500,
    interval_s: float = 60.0,
    transport: httpx.AsyncBaseTransport | None = None,
) -> None:
    """:func:`watch_source` until SIGINT or SIGTERM.

    A signal sets the stop event, which the folder watcher checks every quiet period and the S3
    poller waits on, and cancels a round in flight. The stop does not rest on cancellation alone:
    watchfiles runs its watcher in a worker thread under a task group it cancels itself every
    cycle, where a cancellation landing at that moment could be absorbed.
    """
    stop = asyncio.Event()
    watching = asyncio.ensure_future(
        watch_source(
            source,
            endpoint,
            options,
            console=console,
            debounce_ms=debounce_ms,
            interval_s=interval_s,
            stop=stop,
            transport=transport,
        )
    )

    def request_stop() -> None:
        stop.set()
        watching.cancel()

    loop = asyncio.get_running_loop()
    # A signal the parent set to be ignored (a background job's SIGINT) stays ignored.
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    handled = [signum for signum, handler in previous.items() if handler is not signal.SIG_IGN]
    for signum in handled:
        loop.add_signal_handler(signum, request_stop)
    try:
        with contextlib.suppress(asyncio.CancelledError):
            await watching
    finally:
        for signum in handled:
            loop.remove_signal_handler(signum)
            handler = previous[signum]
            if handler is not None:
                signal.signal(signum, handler)


def run_sync(
    endpoint: Endpoint,
    source_text: str,
    options: SyncOptions,
    *,
    watch: bool = False,
    debounce_ms: int = 1_500,
    interval_s: float = 60.0,
    console: Console | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> int:
    """Entry point of ``rag sync``: 0 when everything synced, 1 when something failed, 2 for a bad source.

    With ``watch`` it runs until Ctrl-C and then returns 0 (each round reports its own failures).
    """
    console = console or Console()
    try:
        source = parse_source(source_text)
        if isinstance(source, S3Source):
            check_s3_endpoint(options.s3_endpoint_url)
    except SourceError as exc:
        console.print(f"[red]rag sync: {escape(str(exc))}[/red]")
        return 2
    if watch:
        # Ctrl-C (or SIGTERM) is how a watch ends; a Ctrl-C before the handlers are in place
        # arrives as KeyboardInterrupt.
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(
                watch_until_signalled(
                    source,
                    endpoint,
                    options,
                    console=console,
                    debounce_ms=debounce_ms,
                    interval_s=interval_s,
                    transport=transport,
                )
            )
        console.print("rag sync: stopped")
        return 0
    try:
        report = asyncio.run(_sync_with_client(source, endpoint, options, console, transport))
    except SyncAbortedError as exc:
        console.print(f"[red]rag sync: {escape(str(exc))}[/red]")
        return 1
    except KeyboardInterrupt:
        console.print("[yellow]rag sync: interrupted (what finished stays; run it again to finish)[/yellow]")
        return 130
    print_report(console, report)
    return 0 if report.ok else 1
