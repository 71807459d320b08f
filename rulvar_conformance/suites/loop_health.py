"""The loop-health suite: what an async store does to the event loops that call it (Y6-Y8).

Run on the asyncio path only (``harness.async_certify``), like cancellation.
Each check runs its own event loop(s) in the check's thread, over a fresh
location opened through the async API, and aims a failpoint at ONE write so it
holds the store for ``HOLD_S`` mid-transaction (a store without failpoints is
examined unforced, and the row's note says so).

- ``async-loop-stall`` (Y6): a heartbeat task ticks every ``TICK_S`` on the
  callers' loop while the held write, reads of the same run and writes of other
  runs are in flight; the longest stall of the loop is measured and reported,
  and must stay below ``LOOP_STALL_BOUND_S``. A read run inline on the loop
  thread behind the held write (any blocking call) stalls the loop for the hold.
- ``async-close-drains`` (Y7): ``aclose`` while writes are queued behind the
  held one: every write that returned is stored (a second handle reads it),
  every other one raised a typed ``RulvarError``, and every caller returned.
- ``async-batch-many-loops`` (Y8): coroutines of two event loops (two threads)
  queue behind the held write of one handle, so one batch carries both loops'
  writes: each must be resumed on its own loop, promptly. The loops run in
  asyncio debug mode, where a future set from another loop's thread raises.
  Not run for a store that does not declare ``shares_across_loops``.
- ``async-load-since-after-delete`` (Y9, X10): the async incremental read
  across a delete, by the polling handle and by another (``_async_since``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import replace
from functools import partial
from typing import Any, Final

from rulvar_conformance.harness.async_facade import open_async_at
from rulvar_conformance.harness.certification import Certification
from rulvar_conformance.harness.kit import (
    ConformanceCheck,
    ConformanceSuite,
    build_check,
    not_run,
    require,
)
from rulvar_conformance.harness.site import at_fresh_location
from rulvar_conformance.suites._async_since import async_load_since_after_delete
from rulvar_store import AsyncOpenedStore
from rulvar_store.backend import (
    Failpoint,
    LocationFactory,
    StoreLocation,
    caller_identity,
    marked_caller,
    set_failpoint_hook,
)
from rulvar_store.errors import RulvarError

__all__ = [
    "HOLD_S",
    "LOOP_STALL_BOUND_S",
    "AsyncOpener",
    "loop_health_conformance",
]

LOOP_STALL_BOUND_S: Final = 0.25
"""Y6's bound: the longest the callers' loop may stall while the store works.
A store that keeps its I/O off the loop stalls it for a few ms (GIL switches);
the held write makes a blocking call stall it for ``HOLD_S``, four times this."""

HOLD_S: Final = 1.0
"""How long the aimed write holds the store mid-transaction."""

TICK_S: Final = 0.005
CALLERS: Final = 6
"""Reads and writes started while the write is held (each kind)."""
CALL_BOUND_S: Final = 10.0
"""Every caller of a check returns within this (a hang fails the check, typed)."""
HOLD_POINTS: Final[frozenset[Failpoint]] = frozenset(
    {"after-begin", "after-fence-check", "before-commit", "mid-write"}
)
QUEUE_POINTS: Final[frozenset[Failpoint]] = frozenset({"before-commit"})
"""Where a held write leaves later writes queued (a batch takes in what is
queued until its COMMIT starts), for the close and many-loops checks."""
RUN: Final = "loop-run"
TTL_MS: Final = 30_000

AsyncOpener = Callable[[StoreLocation], Awaitable[AsyncOpenedStore]]
"""Opens one async handle on a location (the kit's: ``open_async_at``)."""


def _kit_opener(leases: bool) -> AsyncOpener:
    """The kit's opener; a store without leases is opened without a ttl."""

    async def open_at(location: StoreLocation) -> AsyncOpenedStore:
        ttl_ms = TTL_MS if leases else None  # file:// refuses the option
        return await open_async_at(location.opener, ttl_ms, None, False)

    return open_at


class _Hold:
    """A failpoint hook that holds the aimed caller's first write for ``HOLD_S``."""

    def __init__(self, points: frozenset[Failpoint] = HOLD_POINTS) -> None:
        self.points = points
        self.mark: object = None
        self.reached = threading.Event()
        self.point: str | None = None

    def __call__(self, operation: str, point: Failpoint) -> None:
        if (
            point in self.points
            and self.mark is not None
            and caller_identity() is self.mark
            and not self.reached.is_set()
        ):
            self.point = f"{operation} {point}"
            self.reached.set()
            time.sleep(HOLD_S)

    async def held_write(self, write: Callable[[], Awaitable[object]]) -> object:
        """Run ``write`` as the aimed caller (its context carries the mark)."""
        with marked_caller() as mark:
            self.mark = mark
            return await write()

    async def until_reached(self) -> bool:
        """Wait (on the loop, never blocking it) for the hold, ``HOLD_S`` at most."""
        ends = time.monotonic() + HOLD_S
        while not self.reached.is_set() and time.monotonic() < ends:
            await asyncio.sleep(TICK_S)
        return self.reached.is_set()


class _Heartbeat:
    """Ticks on the running loop; ``longest`` is the worst lateness of a tick."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._stop = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._beat())

    async def _beat(self) -> None:
        loop = asyncio.get_running_loop()
        last = loop.time()
        while not self._stop:
            await asyncio.sleep(TICK_S)
            now = loop.time()
            self.longest = max(self.longest, now - last - TICK_S)
            last = now

    async def stop(self) -> float:
        self._stop = True
        if self._task is not None:
            await self._task
        return self.longest


def _hooked(hold: _Hold) -> Any:
    previous = set_failpoint_hook(hold)
    return previous


async def _bounded(calls: list[Awaitable[Any]]) -> list[Any]:
    try:
        return await asyncio.wait_for(
            asyncio.gather(*calls, return_exceptions=True), CALL_BOUND_S
        )
    except TimeoutError:
        require(False, f"callers still waiting after {CALL_BOUND_S:g} s")
        raise  # unreachable: require raised


def _with_note(
    check_id: str,
    title: str,
    clauses: tuple[str, ...],
    body: Callable[[list[str]], None],
) -> ConformanceCheck:
    said: list[str] = []

    def run() -> None:
        said.clear()
        body(said)

    check = build_check(check_id, title, clauses, run)
    return replace(check, note=lambda: "; ".join(said) or None)


# -- Y6: the loop never stalls while the store works ---------------------------------


async def _stall_workload(opened: AsyncOpenedStore, hold: _Hold) -> tuple[float, bool]:
    journal: Any = opened.journal
    await journal.append(RUN, {"seq": 1, "kind": "setup"})
    await journal.put_meta({"runId": RUN, "status": "running"})
    beat = _Heartbeat()
    beat.start()
    held = asyncio.ensure_future(
        hold.held_write(lambda: journal.append(RUN, {"seq": 2, "kind": "held"}))
    )
    forced = await hold.until_reached()
    calls: list[Awaitable[Any]] = [held]
    for number in range(CALLERS):
        calls.append(journal.load(RUN))
        calls.append(journal.append(f"{RUN}-{number}", {"seq": 1, "kind": "other"}))
    if hasattr(journal, "get_meta"):
        calls.append(journal.get_meta(RUN))
    calls.append(journal.list_runs())
    if hasattr(journal, "load_since"):
        calls.append(journal.load_since(RUN, None))
    outcomes = await _bounded(calls)
    longest = await beat.stop()
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    require(not failed, f"calls failed while the loop was watched: {failed[:3]!r}")
    return longest, forced


def _loop_stall(
    locations: LocationFactory, open_async: AsyncOpener, said: list[str]
) -> None:
    with at_fresh_location(locations) as site:
        hold = _Hold()
        previous = _hooked(hold)
        try:

            async def main() -> tuple[float, bool]:
                opened = await open_async(site.location)
                try:
                    return await _stall_workload(opened, hold)
                finally:
                    await opened.aclose()

            longest, forced = asyncio.run(main())
        finally:
            set_failpoint_hook(previous)
        how = (
            f"a write held {HOLD_S:g} s at {hold.point}"
            if forced
            else "no failpoint reached (unforced)"
        )
        said.append(
            f"longest loop stall {longest * 1000:.1f} ms (bound "
            f"{LOOP_STALL_BOUND_S * 1000:.0f} ms) with {how} and "
            f"{2 * CALLERS + 3} reads and writes in flight"
        )
        require(
            longest <= LOOP_STALL_BOUND_S,
            f"the event loop stalled {longest * 1000:.0f} ms while the store worked "
            f"(bound {LOOP_STALL_BOUND_S * 1000:.0f} ms, Y6) with {how}: a store call "
            "blocks the loop thread (I/O or a lock taken on the loop)",
        )


# -- Y7: close lets nothing pass as done that it did not store -----------------------


def _close_drains(
    locations: LocationFactory, open_async: AsyncOpener, said: list[str]
) -> None:
    with at_fresh_location(locations, needs=("shared",)) as site:
        hold = _Hold(QUEUE_POINTS)
        previous = _hooked(hold)
        try:

            async def main() -> tuple[list[Any], bool]:
                opened = await open_async(site.location)
                journal: Any = opened.journal
                await journal.append(RUN, {"seq": 1, "kind": "setup"})
                held = asyncio.ensure_future(
                    hold.held_write(
                        lambda: journal.append(RUN, {"seq": 2, "kind": "held"})
                    )
                )
                forced = await hold.until_reached()
                queued = [
                    asyncio.ensure_future(
                        journal.append(f"{RUN}-{n}", {"seq": 1, "kind": "queued"})
                    )
                    for n in range(CALLERS)
                ]
                await asyncio.sleep(TICK_S)  # queued behind the held write
                closing = asyncio.ensure_future(opened.aclose())
                outcomes = await _bounded([held, *queued, closing])
                return outcomes, forced

            outcomes, forced = asyncio.run(main())
        finally:
            set_failpoint_hook(previous)
        *writes, closed = outcomes
        require(
            not isinstance(closed, BaseException),
            f"aclose() under queued writes raised {closed!r}",
        )
        untyped = [
            w
            for w in writes
            if isinstance(w, BaseException) and not isinstance(w, RulvarError)
        ]
        require(
            not untyped, f"a write cut by close raised untyped {untyped[:3]!r} (Y7)"
        )
        reader = site.open()
        runs = [RUN, *(f"{RUN}-{n}" for n in range(CALLERS))]
        seqs = [2, *([1] * CALLERS)]
        lost = [
            run
            for run, seq, outcome in zip(runs, seqs, writes, strict=True)
            if not isinstance(outcome, BaseException)
            and seq not in [entry.get("seq") for entry in reader.journal.load(run)]
        ]
        done = sum(not isinstance(w, BaseException) for w in writes)
        said.append(
            f"{'held' if forced else 'unforced'}: {done} of {len(writes)} writes "
            f"answered done around aclose(), {len(writes) - done} refused typed"
        )
        require(
            not lost,
            f"writes answered done around aclose() are not stored: {lost} (close "
            "dropped queued writes and reported them done, Y7)",
        )


# -- Y8: coroutines of several loops in one batch, each resumed on its own -----------


class _LoopThread:
    """A debug-mode event loop in a thread of its own, for one check."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.loop.set_debug(True)  # a future set from a foreign thread raises
        self.loop.slow_callback_duration = 60.0  # no slow-callback log noise
        self.thread = threading.Thread(
            target=self.loop.run_forever, name=name, daemon=True
        )
        self.thread.start()

    def run(self, coro: Awaitable[Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]

    def stop(self) -> None:
        # Tasks a failed or cut-short check left pending are cancelled and run to
        # their end first: destroyed pending, they would warn in a later test.
        with suppress(Exception):
            asyncio.run_coroutine_threadsafe(_cancel_the_rest(), self.loop).result(
                CALL_BOUND_S
            )
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(CALL_BOUND_S)
        if not self.thread.is_alive():
            self.loop.close()


async def _cancel_the_rest() -> None:
    """Cancel every other task of the running loop and wait for them to end."""
    rest = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in rest:
        task.cancel()
    await asyncio.gather(*rest, return_exceptions=True)


async def _writes_on_this_loop(journal: Any, tag: str) -> list[Any]:
    calls = [
        journal.append(f"{RUN}-{tag}-{n}", {"seq": 1, "kind": tag})
        for n in range(CALLERS)
    ]
    return await _bounded(calls)


def _many_loops(
    locations: LocationFactory, open_async: AsyncOpener, said: list[str]
) -> None:
    with at_fresh_location(locations) as site:
        hold = _Hold(QUEUE_POINTS)
        first, second = (
            _LoopThread("rulvar-kit-loop-a"),
            _LoopThread("rulvar-kit-loop-b"),
        )
        previous = _hooked(hold)
        try:
            opened: AsyncOpenedStore = first.run(open_async(site.location)).result(
                CALL_BOUND_S
            )
            journal: Any = opened.journal
            if getattr(journal, "shares_across_loops", False) is not True:
                first.run(opened.aclose()).result(CALL_BOUND_S)
                not_run(
                    "the async store does not declare shares_across_loops (one "
                    "handle serving coroutines of several event loops)"
                )
            first.run(journal.append(RUN, {"seq": 1, "kind": "setup"})).result(
                CALL_BOUND_S
            )
            held = first.run(
                hold.held_write(lambda: journal.append(RUN, {"seq": 2, "kind": "held"}))
            )
            forced = hold.reached.wait(HOLD_S)
            started = time.monotonic()
            on_a = first.run(_writes_on_this_loop(journal, "a"))
            on_b = second.run(_writes_on_this_loop(journal, "b"))
            outcomes: dict[str, Any] = {}
            for name, future in (("held", held), ("a", on_a), ("b", on_b)):
                try:
                    outcomes[name] = future.result(CALL_BOUND_S + HOLD_S)
                except Exception as exc:
                    outcomes[name] = exc
            took = time.monotonic() - started
            first.run(opened.aclose()).result(CALL_BOUND_S)
        finally:
            set_failpoint_hook(previous)
            first.stop()
            second.stop()
        said.append(
            f"{'held' if forced else 'unforced'}: {2 * CALLERS} writes of two loops "
            f"resumed in {took:.2f} s"
        )
        for name in ("held", "a", "b"):
            outcome = outcomes[name]
            failed = (
                [outcome]
                if isinstance(outcome, BaseException)
                else [o for o in (outcome or []) if isinstance(o, BaseException)]
            )
            require(
                not failed,
                f"coroutines of loop {name} sharing a batch with another loop's were "
                f"not resumed on their own loop: {failed[:2]!r} (Y8)",
            )


CHECKS: Final = (
    (
        "async-loop-stall",
        "the callers' event loop never stalls past the bound while the store works",
        ("Y6",),
        _loop_stall,
    ),
    (
        "async-close-drains",
        "aclose() under queued writes: each write answered done is stored",
        ("Y7",),
        _close_drains,
    ),
    (
        "async-batch-many-loops",
        "coroutines of two event loops in one batch are each resumed on their own",
        ("Y8",),
        _many_loops,
    ),
    (
        "async-load-since-after-delete",
        "the async load_since across a delete: no old entry, then a restart "
        "with the whole new journal",
        ("Y9", "X10"),
        async_load_since_after_delete,
    ),
)


def loop_health_conformance(
    certification: Certification, open_async: AsyncOpener | None = None
) -> ConformanceSuite:
    """The loop-health checks over fresh locations (``open_async``: the kit's opener)."""
    opener = open_async or _kit_opener("leases" in certification.capabilities)
    locations = certification.locations
    return ConformanceSuite(
        "loop-health",
        tuple(
            _with_note(check_id, title, clauses, partial(body, locations, opener))
            for check_id, title, clauses, body in CHECKS
        ),
    )
