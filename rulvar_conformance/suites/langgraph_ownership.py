"""``langgraph_ownership_conformance(certification)``: fenced LangGraph threads (G clauses).

Each check opens two or three handles on ONE fresh location and puts a
``RulvarSaver`` over each, one per worker, sharing an injected ``ManualClock``:
a lease "expires" when the check moves the clock, never by sleeping, and the
holds' renewals (a third of a 60 s ttl, in real time) never fire during a check.
Graphs are real LangGraph ``StateGraph``s; visibility is checked through a
handle other than the writers'. Needs the ``langgraph`` extra.
"""

from __future__ import annotations

import operator
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Annotated, Any, Final, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint, empty_checkpoint
from langgraph.graph import END, START, StateGraph

from rulvar_conformance.harness.certification import Certification
from rulvar_conformance.harness.kit import (
    THREAD_TIMEOUT_S,
    ConformanceSuite,
    Outcome,
    attempt,
    build_check,
    require,
    run_concurrently,
)
from rulvar_conformance.harness.probe import describe
from rulvar_conformance.harness.site import ManualClock, Site, at_fresh_location
from rulvar_conformance.harness.surfaces import expect_refused
from rulvar_langgraph import (
    LEASE_KEY,
    RulvarSaver,
    ThreadGoneError,
    ensure_owned,
    owned,
)
from rulvar_store import LeaseHeldError, LeaseLostError
from rulvar_store.backend import LocationFactory

__all__ = ["LG_TTL_MS", "langgraph_ownership_conformance"]

LG_TTL_MS: Final = 60_000
"""Long in real time (renewals never fire in a check); expiry comes from the clock."""

SAVER_TYPE: type[RulvarSaver] = RulvarSaver
"""The saver class every check puts over its handles (a self-test swaps in a broken one)."""

THREAD: Final = "lg-thread"
SHORT: Final = 5
LONG: Final = 400


class Trail(TypedDict):
    """The graphs' state: every node appends ``<node>:<worker>``."""

    trail: Annotated[list[str], operator.add]


def _makes_a_thread(ref: str) -> bool:
    """Whether ``ref`` is a checkpoint or a pointer, by the layout docs/guides/langgraph.md documents.

    A checkpoint is ``<run>/c/<ns>/<checkpoint_id>/z`` (``<run>/c/<ns>/<checkpoint_id>``
    when an earlier version stored it) and a pointer ``<run>/p/<ns>`` (earlier
    versions only); writes (``.../w/...``, ``<run>/w/...``) make no thread. Read
    from the documented refs, not the saver's private helpers: the kit checks
    the layout, it does not share its code.
    """
    parts = ref.split("/")
    if len(parts) == 3:
        return parts[1] == "p"
    return parts[1] == "c" and (len(parts) == 4 or parts[4:] == ["z"])


def _node(name: str, worker: str, stall: Callable[[], None] | None) -> Any:
    def node(state: Trail) -> dict[str, list[str]]:
        if stall is not None:
            stall()
        return {"trail": [f"{name}:{worker}"]}

    return node


def three_node_graph(
    saver: BaseCheckpointSaver[Any],
    worker: str,
    *,
    stall: Callable[[], None] | None = None,
    in_subgraph: bool = False,
) -> Any:
    """n1 -> n2 -> n3; ``stall`` runs inside n2 (inside its subgraph's s1 if asked)."""
    graph = StateGraph(Trail)
    graph.add_node("n1", _node("n1", worker, None))
    if in_subgraph:
        inner = StateGraph(Trail)
        inner.add_node("s1", _node("s1", worker, stall))
        inner.add_edge(START, "s1")
        inner.add_edge("s1", END)
        graph.add_node("n2", inner.compile())
    else:
        graph.add_node("n2", _node("n2", worker, stall))
    graph.add_node("n3", _node("n3", worker, None))
    graph.add_edge(START, "n1")
    graph.add_edge("n1", "n2")
    graph.add_edge("n2", "n3")
    graph.add_edge("n3", END)
    return graph.compile(checkpointer=saver)


class Workers:
    """Savers of two workers (and an observer) on one location, one manual clock."""

    def __init__(self, site: Site) -> None:
        self.clock = ManualClock()
        self.a = self._saver(site, "worker-a")
        self.b = self._saver(site, "worker-b")
        self.observer = self._saver(site, "observer")

    def _saver(self, site: Site, owner: str) -> RulvarSaver:
        opened = site.open(LG_TTL_MS, now=self.clock)
        return SAVER_TYPE(opened.journal, opened.transcripts, owner=owner)

    def expire(self) -> None:
        """Every lease taken so far is past its ttl."""
        self.clock.advance(LG_TTL_MS + 1)

    def stored(self) -> dict[str, bytes | None]:
        """Every blob of the thread, read through the observer's handle."""
        blobs = self.observer.transcripts
        return {ref: blobs.get(ref) for ref in blobs.list_refs(THREAD)}

    def markers(self) -> set[str]:
        """Every trail marker in any stored checkpoint of the thread, any namespace."""
        found: set[str] = set()
        for item in self.observer.list({"configurable": {"thread_id": THREAD}}):
            found.update(item.checkpoint["channel_values"].get("trail") or [])
        return found


@contextmanager
def workers(locations: LocationFactory) -> Iterator[Workers]:
    with at_fresh_location(locations, needs=("shared", "clock")) as site:
        yield Workers(site)


class Stall:
    """Parks a node until released; ``reached`` says the node is parked."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self._wake = threading.Event()

    def __call__(self) -> None:
        self.reached.set()
        self._wake.wait(THREAD_TIMEOUT_S)

    def wait_reached(self, what: str) -> None:
        require(self.reached.wait(THREAD_TIMEOUT_S), f"{what} never reached its node")

    def release(self) -> None:
        self._wake.set()


def _in_background(call: Callable[[], object]) -> Callable[[], Outcome[object]]:
    """Start ``call`` on a thread; the returned function joins it and gives its outcome."""
    box: list[Outcome[object]] = []
    thread = threading.Thread(target=lambda: box.append(attempt(call)), daemon=True)
    thread.start()

    def join() -> Outcome[object]:
        thread.join(THREAD_TIMEOUT_S)
        require(box, "the background invocation did not finish (deadlock?)")
        return box[0]

    return join


def _held_invoke(saver: RulvarSaver, graph: Any, first_input: object) -> object:
    with saver.hold(THREAD) as config:
        return graph.invoke(first_input, config, durability="sync")


def _stalled_past_ttl(
    w: Workers, saver: RulvarSaver, *, in_subgraph: bool = False
) -> tuple[Stall, Callable[[], Outcome[object]]]:
    """Worker A invokes the graph in a hold and parks in n2; then its lease expires.

    Returns the stall (release it to wake A) and the join of A's invocation.
    """
    stall = Stall()
    graph = three_node_graph(saver, "worker-a", stall=stall, in_subgraph=in_subgraph)
    zombie = _in_background(partial(_held_invoke, saver, graph, {"trail": []}))
    stall.wait_reached("worker A")
    w.expire()
    return stall, zombie


def _config(**extra: str) -> Any:
    return {"configurable": {"thread_id": THREAD, "checkpoint_ns": "", **extra}}


def _checkpoint(number: int) -> Checkpoint:
    checkpoint = empty_checkpoint()
    # Zero-padded ids sort like uuid6 ids: later checkpoints are larger.
    checkpoint["id"] = f"1f0-{number:08d}"
    checkpoint["channel_values"] = {"v": number}
    checkpoint["channel_versions"] = {"v": number}
    return checkpoint


def _at(held: Any, stored: Any) -> Any:
    """The held config pointed at a stored checkpoint."""
    return {"configurable": {**held["configurable"], **stored["configurable"]}}


def _put(
    saver: RulvarSaver, config: Any, number: int, parent: str | None = None
) -> Any:
    if parent is not None:
        config = {
            **config,
            "configurable": {**config["configurable"], "checkpoint_id": parent},
        }
    return saver.put(
        config, _checkpoint(number), {"source": "loop", "step": number}, {}
    )


def _zombie_stalled_node(locations: LocationFactory) -> None:
    with workers(locations) as w:
        stall, zombie = _stalled_past_ttl(w, w.a)
        result = _held_invoke(w.b, three_node_graph(w.b, "worker-b"), None)
        stall.release()
        expect_refused(zombie(), "the stalled worker's invocation after the takeover")
        expected = ["n1:worker-a", "n2:worker-b", "n3:worker-b"]
        require(
            isinstance(result, dict) and result.get("trail") == expected,
            f"expected the successor to finish with {expected}, observed {result!r}",
        )
        latest = w.observer.get_tuple(_config())
        require(
            latest is not None
            and latest.checkpoint["channel_values"].get("trail") == expected,
            f"expected the thread to end in the successor's state {expected}, "
            f"observed {latest.checkpoint['channel_values'] if latest else None}",
        )
        require(
            "n2:worker-a" not in w.markers(),
            "a checkpoint holds the zombie's n2 result: its late write landed",
        )


def _one_of_two_concurrent(locations: LocationFactory) -> None:
    with workers(locations) as w:
        refused = threading.Event()

        def wait_for_loser() -> None:
            # The winner stays inside its invocation until the loser was refused,
            # so the two invocations really overlap.
            refused.wait(THREAD_TIMEOUT_S)

        def invoke(saver: RulvarSaver, worker: str) -> object:
            graph = three_node_graph(saver, worker, stall=wait_for_loser)
            try:
                return _held_invoke(saver, graph, {"trail": []})
            except LeaseHeldError:
                refused.set()
                raise

        outcomes = run_concurrently(
            [partial(invoke, w.a, "worker-a"), partial(invoke, w.b, "worker-b")]
        )
        winners = [o for o in outcomes if o.ok]
        require(
            len(winners) == 1,
            f"expected exactly one invocation to proceed, observed {outcomes}",
        )
        loser = next(o for o in outcomes if not o.ok)
        expect_refused(loser, "the second concurrent invocation of one thread")
        winner = winners[0].value
        assert isinstance(winner, dict)
        worker = winner["trail"][0].split(":")[1]
        expected = {f"n{i}:{worker}" for i in (1, 2, 3)}
        require(
            w.markers() == expected,
            f"expected only {worker}'s checkpoints, observed markers {sorted(w.markers())}",
        )


def _late_write_after_delete(locations: LocationFactory) -> None:
    with workers(locations) as w:
        stall, zombie = _stalled_past_ttl(w, w.a)
        w.b.delete_thread(THREAD)
        stall.release()
        expect_refused(zombie(), "the invocation's write after delete_thread")
        require(w.stored() == {}, f"the deleted thread came back: {sorted(w.stored())}")
        require(
            w.observer.get_tuple(_config()) is None,
            "get_tuple found the deleted thread",
        )


def _unheld_late_write_after_delete(locations: LocationFactory) -> None:
    with workers(locations) as w:
        stall = Stall()
        graph = three_node_graph(w.a, "worker-a", stall=stall)
        late = _in_background(
            partial(graph.invoke, {"trail": []}, _config(), durability="sync")
        )
        stall.wait_reached("worker A (unheld)")
        w.b.delete_thread(THREAD)
        stall.release()
        outcome = late()
        require(
            isinstance(outcome.error, ThreadGoneError),
            f"expected the unheld late put to raise ThreadGoneError, observed {outcome}",
        )
        # Only checkpoints (and pointers of earlier versions) make a thread: the late task's writes may
        # land as an orphan blob no read reaches (put_writes is not refused).
        require(
            not any(_makes_a_thread(ref) for ref in w.stored()),
            f"the deleted thread came back: {sorted(w.stored())}",
        )
        require(
            w.observer.get_tuple(_config()) is None,
            "get_tuple found the deleted thread",
        )
        require(
            w.observer.journal.get_meta(THREAD) is None,  # type: ignore[attr-defined]  # check_stores saw get_meta
            "the deleted thread's run meta came back",
        )
        fresh = three_node_graph(w.b, "worker-b").invoke({"trail": []}, _config())
        require(
            fresh.get("trail") == ["n1:worker-b", "n2:worker-b", "n3:worker-b"],
            f"a fresh start of the deleted thread was refused: {fresh!r}",
        )


class _RecordingSaver(RulvarSaver):
    """Notes the namespace of every refused ``put_writes``/``put``."""

    refused_ns: list[str]

    def put_writes(
        self, config: Any, writes: Any, task_id: str, task_path: str = ""
    ) -> None:
        try:
            super().put_writes(config, writes, task_id, task_path)
        except LeaseHeldError:
            self.refused_ns.append(config["configurable"].get("checkpoint_ns", ""))
            raise

    def put(
        self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any
    ) -> Any:
        try:
            return super().put(config, checkpoint, metadata, new_versions)
        except LeaseHeldError:
            self.refused_ns.append(config["configurable"].get("checkpoint_ns", ""))
            raise


def _subgraph_writes_fenced(locations: LocationFactory) -> None:
    with workers(locations) as w:
        a = _RecordingSaver(w.a.journal, w.a.transcripts, owner="worker-a")
        a.refused_ns = []
        stall, zombie = _stalled_past_ttl(w, a, in_subgraph=True)
        _held_invoke(w.b, three_node_graph(w.b, "worker-b", in_subgraph=True), None)
        stall.release()
        expect_refused(zombie(), "the zombie's invocation inside a subgraph")
        require(
            any(ns for ns in a.refused_ns),
            f"expected a refused write in the subgraph's namespace, refused: {a.refused_ns}",
        )
        require(
            "s1:worker-a" not in w.markers(),
            "a checkpoint holds the zombie subgraph's s1 result",
        )


def _superseded_holder_refused(locations: LocationFactory) -> None:
    with workers(locations) as w, w.a.hold(THREAD) as stale:
        first = _put(w.a, stale, 1)
        w.expire()
        with w.b.hold(THREAD):
            before = w.stored()
            tries = {
                "put": lambda: _put(
                    w.a, stale, 2, first["configurable"]["checkpoint_id"]
                ),
                "put_writes": lambda: w.a.put_writes(
                    _at(stale, first), [("v", 9)], "task-1"
                ),
                "delete_thread": lambda: w.a.delete_thread(THREAD),
                "prune": lambda: w.a.prune([THREAD], strategy="delete"),
            }
            for name, call in tries.items():
                expect_refused(attempt(call), f"the superseded holder's {name}")
            require(w.stored() == before, "a refused write changed the stored thread")


def _brief_lease_refused_while_held(locations: LocationFactory) -> None:
    with workers(locations) as w, w.a.hold(THREAD) as held:
        first = _put(w.a, held, 1)
        before = w.stored()
        plain = _config(checkpoint_id=first["configurable"]["checkpoint_id"])
        tries = {
            "put": lambda: _put(w.b, _config(), 2),
            "put_writes": lambda: w.b.put_writes(plain, [("v", 9)], "task-1"),
            "delete_thread": lambda: w.b.delete_thread(THREAD),
            "copy_thread onto it": lambda: w.b.copy_thread("elsewhere", THREAD),
        }
        for name, call in tries.items():
            expect_refused(attempt(call), f"another worker's unheld {name}")
        require(w.stored() == before, "a refused unheld write changed the thread")


def _no_silent_reacquire(locations: LocationFactory) -> None:
    with workers(locations) as w, w.a.hold(THREAD) as stale:
        _put(w.a, stale, 1)
        w.expire()
        with w.b.hold(THREAD) as fresh:
            _put(w.b, fresh, 2)
        # The thread is free again; the superseded holder must still be refused.
        before = w.stored()
        for number in (3, 4):
            expect_refused(
                attempt(partial(_put, w.a, stale, number)),
                f"superseded holder's write {number} after the successor released",
            )
        require(w.stored() == before, "the superseded holder re-acquired and wrote")


class _CountingStore:
    """Counts the calls a saver makes, by method name."""

    def __init__(self, inner: object, calls: list[str]) -> None:
        self._inner = inner
        self._calls = calls

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if callable(attribute):
            self._calls.append(name)
        return attribute


LOSS_TTL_MS: Final = 1_500
"""The lost-hold check's ttl, in real time: its keeper renews every half second."""
LOSS_BOUND_S: Final = 10.0


def _lost_hold_stops_its_work(locations: LocationFactory) -> None:
    """L13: a hold whose lease is gone says so, and its writes never reach the store."""
    with at_fresh_location(locations, needs=("shared",)) as site:
        opened, other = site.open(LOSS_TTL_MS), site.open(LOSS_TTL_MS)
        calls: list[str] = []
        saver = SAVER_TYPE(
            _CountingStore(opened.journal, calls),
            _CountingStore(opened.transcripts, calls),
            owner="worker-a",
        )
        with saver.hold(THREAD) as held:
            first = _put(saver, held, 1)
            asked = attempt(lambda: owned(held))
            require(
                asked.ok and asked.value is True,
                f"owned(config) of a live hold must be True, observed "
                f"{asked.value if asked.ok else describe(asked.error)}",
            )
            # Another handle gives the hold's lease up: its next renewal is refused.
            other.journal.release(held["configurable"][LEASE_KEY])  # type: ignore[attr-defined]  # a leasable store
            deadline = time.monotonic() + LOSS_BOUND_S
            while (asked := attempt(lambda: owned(held))).ok and asked.value:
                require(
                    time.monotonic() < deadline,
                    f"owned(config) still True {LOSS_BOUND_S:.0f} s after the hold's "
                    f"lease was released (ttl {LOSS_TTL_MS} ms, renewed every ttl/3)",
                )
                time.sleep(0.02)
            lost = attempt(lambda: ensure_owned(held))
            require(
                isinstance(lost.error, LeaseLostError),
                "ensure_owned(config) of a hold whose lease is gone must raise "
                f"LeaseLostError, observed {describe(lost.error)}",
            )
            calls.clear()
            late = attempt(
                lambda: _put(saver, held, 2, first["configurable"]["checkpoint_id"])
            )
            require(
                isinstance(late.error, LeaseLostError) and not calls,
                "the lost hold's put must raise LeaseLostError before any store "
                f"call, observed {describe(late.error)} after calls {calls}",
            )


def _latest_read_is_flat(locations: LocationFactory) -> None:
    with at_fresh_location(locations, needs=("shared",)) as site:
        writer_store = site.open(LG_TTL_MS)
        writer = SAVER_TYPE(
            writer_store.journal, writer_store.transcripts, owner="writer"
        )
        counts: dict[int, list[str]] = {}
        for length in (SHORT, LONG):
            thread = f"{THREAD}-{length}"
            config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
            with writer.hold(thread) as held:
                parent = None
                for number in range(1, length + 1):
                    parent = _put(writer, held, number, parent)["configurable"][
                        "checkpoint_id"
                    ]
            fresh = site.open(LG_TTL_MS)
            calls: list[str] = []
            reader = SAVER_TYPE(
                _CountingStore(fresh.journal, calls),
                _CountingStore(fresh.transcripts, calls),
                owner="reader",
            )
            calls.clear()
            latest = reader.get_tuple(config)
            require(
                latest is not None
                and latest.checkpoint["channel_values"] == {"v": length},
                f"expected checkpoint {length} as the latest of {length}, observed {latest}",
            )
            counts[length] = calls
        require(
            counts[SHORT] == counts[LONG] and len(counts[LONG]) <= 3,
            f"expected the same few reads for {SHORT} and {LONG} checkpoints, observed "
            f"{counts[SHORT]} and {counts[LONG]}",
        )
        require(
            "list_refs" not in counts[LONG] and "load" not in counts[LONG],
            f"the latest read listed or folded the thread: {counts[LONG]}",
        )


def _space_reclaimed(locations: LocationFactory) -> None:
    with workers(locations) as w:
        with w.a.hold(THREAD) as held:
            parent = None
            for number in range(1, 11):
                config: Any = held
                if number > 5:
                    config = {"configurable": {**held["configurable"]}}
                    config["metadata"] = {"run_id": "run-late"}
                stored = _put(w.a, config, number, parent)
                parent = stored["configurable"]["checkpoint_id"]
                w.a.put_writes(_at(held, stored), [("v", "x" * 1000)], f"task-{number}")

        def size() -> int:
            return sum(len(blob or b"") for blob in w.stored().values())

        full = size()
        w.b.delete_for_runs(["run-late"])
        after_runs = size()
        remaining = [
            t.checkpoint["channel_values"]["v"] for t in w.observer.list(_config())
        ]
        require(
            remaining == [5, 4, 3, 2, 1],
            f"expected delete_for_runs to leave checkpoints 5..1, observed {remaining}",
        )
        w.b.prune([THREAD])
        after_prune = size()
        remaining = [
            t.checkpoint["channel_values"]["v"] for t in w.observer.list(_config())
        ]
        require(
            remaining == [5],
            f"expected prune to keep checkpoint 5, observed {remaining}",
        )
        require(
            full > after_runs > after_prune > 0,
            f"expected stored bytes to fall at each step, observed {full}, "
            f"{after_runs}, {after_prune}",
        )
        require(
            len(w.stored()) == 2,
            f"expected one checkpoint and its writes, observed {sorted(w.stored())}",
        )


Body = Callable[[LocationFactory], None]

CHECKS: Final[tuple[tuple[str, str, tuple[str, ...], Body], ...]] = (
    (
        "lg-superseded-holder-refused",
        "a superseded holder's writes and deletes are refused, nothing changes",
        ("G1",),
        _superseded_holder_refused,
    ),
    (
        "lg-zombie-stalled-node",
        "a worker stalled in a node past its ttl cannot land its checkpoint",
        ("G2",),
        _zombie_stalled_node,
    ),
    (
        "lg-one-of-two-concurrent",
        "of two concurrent invocations of a thread exactly one proceeds",
        ("G3",),
        _one_of_two_concurrent,
    ),
    (
        "lg-late-write-after-delete",
        "a late write after delete_thread is refused; the thread stays deleted",
        ("G5",),
        _late_write_after_delete,
    ),
    (
        "lg-unheld-late-write-after-delete",
        "an unheld late put after delete_thread is refused; a fresh start is not",
        ("G13",),
        _unheld_late_write_after_delete,
    ),
    (
        "lg-subgraph-writes-fenced",
        "a subgraph's writes carry the hold's lease and are fenced",
        ("G6",),
        _subgraph_writes_fenced,
    ),
    (
        "lg-brief-lease-refused-while-held",
        "an unheld write is refused while another worker holds the thread",
        ("G7",),
        _brief_lease_refused_while_held,
    ),
    (
        "lg-no-silent-reacquire",
        "a refused holder never re-acquires, even once the thread is free",
        ("G8",),
        _no_silent_reacquire,
    ),
    (
        "lg-latest-read-is-flat",
        "a fresh saver reads the latest checkpoint with the same few reads at any length",
        ("G9",),
        _latest_read_is_flat,
    ),
    (
        "lg-lost-hold-stops-its-work",
        "a hold whose lease is lost says so and its writes fail typed before any I/O",
        ("L13",),
        _lost_hold_stops_its_work,
    ),
    (
        "lg-space-reclaimed",
        "delete_for_runs and prune delete the dropped checkpoints' blobs",
        ("G10",),
        _space_reclaimed,
    ),
)


def langgraph_ownership_conformance(certification: Certification) -> ConformanceSuite:
    """The ownership suite over fresh locations of one backend (G1-G3, G5-G10, G13)."""
    locations = certification.locations
    return ConformanceSuite(
        "langgraph-ownership",
        tuple(
            build_check(check_id, title, clauses, partial(body, locations))
            for check_id, title, clauses, body in CHECKS
        ),
    )
