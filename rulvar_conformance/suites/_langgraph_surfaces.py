"""LangGraph saver checks beyond ownership: what LangGraph reads back, and what a lost hold does.

Each check puts savers of ``saver_type`` (``RulvarSaver``, or a self-test's
broken one) over handles of ONE fresh location with a ``ManualClock``, and
reads through a handle other than the writer's where visibility matters.

- ``lg-list-filter-then-limit`` (G27): ``list(filter=..., limit=n)`` returns
  the n newest checkpoints that MATCH the filter, not the matches among the n
  newest.
- ``lg-special-writes-replace`` (G28): a task's second write to a special
  channel (``__error__``, ``__interrupt__``: a negative index) replaces the
  first; a repeated regular write (same task, same index) keeps the first.
- ``lg-pending-writes-order`` (G29): ``pending_writes`` come in
  ``(task_path, task_id, idx)`` order, whatever order the tasks wrote in.
- ``lg-refused-put-leaves-no-meta`` (G1, G5): a holder's first put of a
  thread stops after its checkpoint blob (a failpoint) while a successor takes
  the thread over and deletes it; the run meta that put writes next must be
  refused, so the thread stays deleted in ``rulvar runs``.
- ``lg-delete-thread-every-layout`` (G10): ``delete_thread`` removes every
  blob under the thread's run, blobs of earlier layouts (pointers, checkpoints
  without ``/z``, one writes blob per checkpoint) included.
- ``lg-renewer-stops-when-lost`` (G8): a hold whose lease expired and was
  taken over never takes the thread back: after the successor released, a
  third worker can take it at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, Final

from langgraph.checkpoint.base import Checkpoint, empty_checkpoint

from rulvar_conformance.harness.failpause import Background
from rulvar_conformance.harness.kit import attempt, not_run, require
from rulvar_conformance.harness.site import ManualClock, Site, at_fresh_location
from rulvar_conformance.harness.stopping import StopAt, reached_or_done
from rulvar_langgraph import RulvarSaver
from rulvar_store import LeaseHeldError
from rulvar_store.backend import LocationFactory, set_failpoint_hook

__all__ = ["SURFACE_CHECKS", "SaverType"]

SaverType = type[RulvarSaver]
TTL_MS: Final = 60_000
SHORT_TTL_MS: Final = 300
"""The renewer check's ttl: its hold renews every 100 ms in real time."""
THREAD: Final = "lg-surface"
ERROR: Final = "__error__"
BACKGROUND_S: Final = 10.0


class _Savers:
    """Savers of ``saver_type`` on one location (a, b, observer), one manual clock."""

    def __init__(self, site: Site, saver_type: SaverType, ttl_ms: int) -> None:
        self.clock = ManualClock()
        self.ttl_ms = ttl_ms
        self.a = self._saver(site, saver_type, "worker-a")
        self.b = self._saver(site, saver_type, "worker-b")
        self.observer = self._saver(site, saver_type, "observer")

    def _saver(self, site: Site, saver_type: SaverType, owner: str) -> RulvarSaver:
        opened = site.open(self.ttl_ms, now=self.clock)
        return saver_type(opened.journal, opened.transcripts, owner=owner)

    def expire(self) -> None:
        self.clock.advance(self.ttl_ms + 1)


@contextmanager
def _savers(
    locations: LocationFactory, saver_type: SaverType, ttl_ms: int = TTL_MS
) -> Iterator[_Savers]:
    with at_fresh_location(locations, needs=("shared", "clock")) as site:
        yield _Savers(site, saver_type, ttl_ms)


def _config(checkpoint_id: str | None = None) -> Any:
    configurable: dict[str, Any] = {"thread_id": THREAD, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _checkpoint(number: int) -> Checkpoint:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = f"1f0-{number:08d}"  # sorts like uuid6: later is larger
    checkpoint["channel_values"] = {"v": number}
    checkpoint["channel_versions"] = {"v": number}
    return checkpoint


def _chain(
    saver: RulvarSaver, config: Any, steps: int, source: Callable[[int], str]
) -> Any:
    """Put ``steps`` checkpoints, each the child of the one before; the last config."""
    stored = config
    for number in range(1, steps + 1):
        metadata: Any = {"source": source(number), "step": number}
        stored = saver.put(
            {"configurable": {**config["configurable"], **stored["configurable"]}},
            _checkpoint(number),
            metadata,
            {},
        )
    return stored


# -- G27 ------------------------------------------------------------------------------


def _list_filter_then_limit(locations: LocationFactory, saver_type: SaverType) -> None:
    with _savers(locations, saver_type) as s:
        _chain(s.a, _config(), 7, lambda n: "input" if n % 2 else "loop")
        listed = list(s.observer.list(_config(), filter={"source": "loop"}, limit=2))
        steps = [item.metadata.get("step") for item in listed]
        require(
            steps == [6, 4],
            f"list(filter={{'source': 'loop'}}, limit=2) returned steps {steps}, "
            "expected the two newest matching checkpoints [6, 4] (G27: the filter "
            "applies before the limit)",
        )


# -- G28 ------------------------------------------------------------------------------


def _special_writes_replace(locations: LocationFactory, saver_type: SaverType) -> None:
    with _savers(locations, saver_type) as s:
        stored = _chain(s.a, _config(), 1, lambda n: "loop")
        s.a.put_writes(stored, [(ERROR, "first"), ("chan", "kept")], "task-1")
        s.a.put_writes(stored, [(ERROR, "second"), ("chan", "ignored")], "task-1")
        found = s.observer.get_tuple(stored)
        require(found is not None, "the checkpoint written is not read back")
        assert found is not None
        pending = [
            (task, channel, value)
            for task, channel, value in found.pending_writes or []
        ]
        errors = [value for _, channel, value in pending if channel == ERROR]
        regular = [value for _, channel, value in pending if channel == "chan"]
        require(
            errors == ["second"],
            f"after two writes of task-1 to {ERROR}, pending writes hold {errors} "
            "(G28: a special channel's write replaces the task's earlier one)",
        )
        require(
            regular == ["kept"],
            f"after a repeated regular write of task-1, pending writes hold {regular} "
            "(G28: a repeated regular write keeps the first)",
        )


# -- G29 ------------------------------------------------------------------------------


def _pending_writes_order(locations: LocationFactory, saver_type: SaverType) -> None:
    with _savers(locations, saver_type) as s:
        stored = _chain(s.a, _config(), 1, lambda n: "loop")
        # Written out of order: task paths, task ids and indexes all disagree.
        s.a.put_writes(stored, [("c", "z0"), ("c", "z1")], "task-a", "~b")
        s.a.put_writes(stored, [("c", "y0")], "task-b", "~a")
        s.a.put_writes(stored, [("c", "x0"), ("c", "x1")], "task-c", "~a")
        found = s.observer.get_tuple(stored)
        require(found is not None, "the checkpoint written is not read back")
        assert found is not None
        values = [value for _, _, value in found.pending_writes or []]
        expected = ["y0", "x0", "x1", "z0", "z1"]
        require(
            values == expected,
            f"pending_writes came as {values}, expected {expected}: ordered by "
            "(task_path, task_id, idx) (G29)",
        )


# -- G1, G5 ---------------------------------------------------------------------------


def _refused_put_leaves_no_meta(
    locations: LocationFactory, saver_type: SaverType
) -> None:
    with _savers(locations, saver_type) as s:
        pause = StopAt({"after-commit"})
        previous = set_failpoint_hook(pause)
        try:
            with s.a.hold(THREAD) as held:

                def first_put() -> object:
                    pause.aim()
                    return s.a.put(held, _checkpoint(1), {"source": "loop"}, {})

                # A's first put stands between its checkpoint blob and the run
                # meta that makes the thread a run, while a successor takes the
                # thread over and deletes it.
                put = Background(first_put).start()
                if not reached_or_done(pause, put):
                    pause.go.set()
                    put.wait(BACKGROUND_S)
                    not_run(
                        "the store never calls rulvar_store.backend.hit (no after-commit failpoint to stop the put at)"
                    )
                s.expire()
                with s.b.hold(THREAD):
                    s.b.delete_thread(THREAD)
                pause.go.set()
                require(
                    put.wait(BACKGROUND_S), "the superseded holder's put never ended"
                )
        finally:
            pause.go.set()
            set_failpoint_hook(previous)
        journal: Any = s.observer.journal
        run_ids = [str(meta.get("runId")) for meta in journal.list_runs()]
        require(
            run_ids == [],
            f"after a refused put of a superseded holder, the deleted thread is "
            f"listed again: runs {run_ids} (its run meta landed outside the lease; "
            "G1, G5: a refused write lands nothing)",
        )
        blobs = s.observer.transcripts.list_refs(THREAD)
        require(blobs == [], f"a refused put left blobs: {blobs[:5]} (G1)")


# -- G10 ------------------------------------------------------------------------------


def _delete_thread_every_layout(
    locations: LocationFactory, saver_type: SaverType
) -> None:
    with _savers(locations, saver_type) as s:
        stored = _chain(s.a, _config(), 2, lambda n: "loop")
        s.a.put_writes(stored, [("c", "v")], "task-1")
        refs = s.observer.transcripts.list_refs(THREAD)
        require(refs != [], "the saver stored no blob under the thread's run")
        # Blobs an earlier version of the saver left (the layout the README lists):
        # a pointer, a checkpoint without /z, and one writes blob per checkpoint.
        journal: Any = s.observer.journal
        lease = journal.acquire(THREAD, "earlier-version")
        earlier = [
            f"{THREAD}/p/",
            f"{THREAD}/c//1f0-00000000",
            f"{THREAD}/w//1f0-00000000",
        ]
        for ref in earlier:
            s.observer.transcripts.put(ref, b"earlier layout", lease)
        journal.release(lease)
        s.b.delete_thread(THREAD)
        left = s.observer.transcripts.list_refs(THREAD)
        require(
            left == [],
            f"delete_thread left blobs under the thread's run: {left[:5]} (G10: every "
            "blob of the thread, earlier layouts included)",
        )


# -- G8 -------------------------------------------------------------------------------


def _renewer_stops_when_lost(locations: LocationFactory, saver_type: SaverType) -> None:
    renewals = SHORT_TTL_MS / 3 / 1000
    with _savers(locations, saver_type, SHORT_TTL_MS) as s:
        taken: list[str] = []
        hold = s.a.hold(THREAD)
        hold.__enter__()
        try:
            s.expire()  # the lease lapses; its renewer's next renew is refused
            time.sleep(3 * renewals)
            try:
                with s.b.hold(THREAD):
                    time.sleep(3 * renewals)
            except LeaseHeldError:
                taken.append("the successor could not take the expired thread")
            time.sleep(3 * renewals)  # the thread is free: a re-taking renewer takes it
            try:
                with s.observer.hold(THREAD):
                    pass
            except LeaseHeldError:
                taken.append("a third worker could not take the released thread")
        finally:
            attempt(partial(hold.__exit__, None, None, None))
        require(
            not taken,
            f"{'; '.join(taken)}: the lost hold's renewer took the thread back "
            "(G8: a hold whose renewal is refused never acquires again)",
        )


SURFACE_CHECKS: Final[
    tuple[
        tuple[str, str, tuple[str, ...], Callable[[LocationFactory, SaverType], None]],
        ...,
    ]
] = (
    (
        "lg-list-filter-then-limit",
        "list(filter=, limit=n) returns the n newest matching checkpoints",
        ("G27",),
        _list_filter_then_limit,
    ),
    (
        "lg-special-writes-replace",
        "a special channel's write replaces the task's earlier one; a regular one does not",
        ("G28",),
        _special_writes_replace,
    ),
    (
        "lg-pending-writes-order",
        "pending writes come in (task_path, task_id, idx) order",
        ("G29",),
        _pending_writes_order,
    ),
    (
        "lg-refused-put-leaves-no-meta",
        "a superseded holder's refused put lands nothing, run meta included",
        ("G1", "G5"),
        _refused_put_leaves_no_meta,
    ),
    (
        "lg-delete-thread-every-layout",
        "delete_thread removes every blob of the thread, earlier layouts included",
        ("G10",),
        _delete_thread_every_layout,
    ),
    (
        "lg-renewer-stops-when-lost",
        "a hold whose lease was taken over never takes the thread back",
        ("G8",),
        _renewer_stops_when_lost,
    ),
)
