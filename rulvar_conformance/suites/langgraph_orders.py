"""``langgraph_orders_conformance(certification, savers)``: write orders (G15, G16, G18).

LangGraph's default durability (``"async"``) puts checkpoints one after the
other in the background and pending writes in the background too, unordered
against them. Whatever a saver (or a hold of it) remembers between calls must
agree with the store whatever that order: these checks drive any saver
factory (``Savers``: a sync and an asyncio saver over an opened store) with
the order LangGraph really issues, with the order that lost writes in issue
39, with seeded adversarial orders and with concurrent background calls,
each with and without a hold, and judge every read against LangGraph's stock
``InMemorySaver`` run through the same calls, then the store itself through a
fresh saver. Real ``StateGraph``s (interrupts, ``Send``, a subgraph) run with
``durability="async"``. A thread written by a stock saver (string channel
versions) must continue. Needs the ``langgraph`` extra.
"""

from __future__ import annotations

import asyncio
import operator
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, Final, TypeAlias, TypedDict, cast

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt

from rulvar_conformance.harness.certification import Certification
from rulvar_conformance.harness.kit import ConformanceSuite, build_check, require
from rulvar_conformance.harness.site import Site, at_fresh_location
from rulvar_conformance.suites._write_orders import (
    Answer,
    Put,
    PutWrites,
    Read,
    ReadAt,
    Step,
    adversarial_schedules,
    answer,
    areplay,
    areplay_concurrently,
    checkpoint_ids,
    oracle,
    replay,
    replay_concurrently,
    stored_answers,
    stored_oracle,
)
from rulvar_langgraph import AsyncRulvarSaver, RulvarSaver
from rulvar_store import AsyncOpenedStore, OpenedStore
from rulvar_store.backend import LocationFactory, adapt_opened

__all__ = [
    "EXPECTED_RUNS",
    "INPUTS",
    "ISSUE_ORDER",
    "Calls",
    "Savers",
    "async_rulvar_saver",
    "fan_graph",
    "langgraph_orders_conformance",
    "rulvar_saver",
]

THREAD: Final = "lg-orders"
TTL_MS: Final = 60_000
SCHEDULES: Final = 12
"""Adversarial schedules per mode (4 modes): enough to hit every reordering of
a three-checkpoint chain's puts and writes several times, seeded."""
INVOCATIONS: Final = 3
"""Threads run through the real graph per mode (three invocations each)."""
PUT_DELAY_S: Final = 0.01
"""How late each checkpoint put starts in the real-graph check: the step's
pending writes, running beside it, land first (a legal LangGraph order)."""


def rulvar_saver(opened: OpenedStore, owner: str) -> RulvarSaver:
    """The honest sync saver: ``RulvarSaver`` over the handle."""
    return RulvarSaver.over(opened, owner=owner)


def async_rulvar_saver(opened: AsyncOpenedStore, owner: str) -> AsyncRulvarSaver:
    """The honest asyncio saver: ``AsyncRulvarSaver`` over the handle."""
    return AsyncRulvarSaver.over(opened, owner=owner)


@dataclass(frozen=True)
class Savers:
    """How the suite makes savers: over a sync and over an asyncio opened store.

    Each saver must be a ``BaseCheckpointSaver`` with ``hold(thread_id)`` (a
    context manager, async for the asyncio one) yielding the config to invoke
    with, like ``RulvarSaver`` and ``AsyncRulvarSaver``.
    """

    sync: Callable[[OpenedStore, str], Any] = rulvar_saver
    asyncio: Callable[[AsyncOpenedStore, str], Any] = async_rulvar_saver


ISSUE_ORDER: Final[tuple[Step, ...]] = (
    Read(),
    PutWrites(1, "task-1", (("a", 1),)),
    Put(0),
    Put(1),
    Read(),
    PutWrites(1, "task-1", (("__interrupt__", "ask"),)),
    Read(),
    ReadAt(0),
)
"""Issue 39's order: a step's writes land before its checkpoint's parent."""

LATE_EARLIER_WRITES: Final[tuple[Step, ...]] = (
    Read(),
    Put(0),
    Put(1),
    PutWrites(2, "task-2", (("a", 2),)),
    PutWrites(1, "task-1", (("a", 1),)),
    Put(2),
    Read(),
    PutWrites(2, "task-2b", (("b", 2),)),
    Read(),
    ReadAt(1),
)
"""A step's writes, then a late write on the step before, then the checkpoint."""


def _config(thread: str = THREAD) -> Any:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


class _Mode:
    """One way to drive the saver: sync or asyncio, inside a hold or not."""

    def __init__(self, asyncio_api: bool, held: bool) -> None:
        self.asyncio_api = asyncio_api
        self.held = held

    def __str__(self) -> str:
        api = "asyncio" if self.asyncio_api else "sync"
        return f"{api} saver {'inside a hold' if self.held else 'outside a hold'}"


MODES: Final = tuple(_Mode(a, h) for a in (False, True) for h in (True, False))


def _held(saver: Any, held: bool, thread: str) -> AbstractContextManager[Any]:
    return saver.hold(thread) if held else nullcontext(_config(thread))


def _aheld(saver: Any, held: bool, thread: str) -> AbstractAsyncContextManager[Any]:
    return saver.hold(thread) if held else _anull(thread)


class _anull:  # an async nullcontext of the plain config
    def __init__(self, thread: str) -> None:
        self._thread = thread

    async def __aenter__(self) -> Any:
        return _config(self._thread)

    async def __aexit__(self, *exc: object) -> None:
        return None


def _with_async(
    site: Site, savers: Savers, body: Callable[[Any], Coroutine[Any, Any, Any]]
) -> Any:
    """Run ``body(saver)`` on a fresh event loop over an asyncio handle of ``site``."""

    async def scenario() -> Any:
        served = adapt_opened(site.open(TTL_MS))
        try:
            return await body(savers.asyncio(served, "worker"))
        finally:
            await served.aclose()

    return asyncio.run(scenario())


Run: TypeAlias = tuple[str, Sequence[Step], Sequence[str]]
"""One schedule on one thread: the thread id, the steps, the chain's ids."""


def _run_schedules(
    site: Site, savers: Savers, mode: _Mode, runs: Sequence[Run]
) -> list[list[Answer]]:
    """Each schedule on its own thread, through one saver of the mode."""
    if not mode.asyncio_api:
        saver = savers.sync(site.open(TTL_MS), "worker")
        answers: list[list[Answer]] = []
        for thread, steps, ids in runs:
            with _held(saver, mode.held, thread) as config:
                answers.append(replay(saver, config, steps, ids))
        return answers

    async def body(saver: Any) -> list[list[Answer]]:
        answers: list[list[Answer]] = []
        for thread, steps, ids in runs:
            async with _aheld(saver, mode.held, thread) as config:
                answers.append(await areplay(saver, config, steps, ids))
        return answers

    found: list[list[Answer]] = _with_async(site, savers, body)
    return found


def _observer(site: Site, savers: Savers) -> Any:
    return savers.sync(site.open(TTL_MS), "observer")


def _judge_schedules(
    locations: LocationFactory,
    savers: Savers,
    schedules: Sequence[tuple[str, Sequence[Step]]],
) -> None:
    """Each mode's reads and the stored threads agree with the stock saver's.

    One location per mode; each schedule runs on a thread of its own there.
    """
    for mode in MODES:
        runs: list[Run] = []
        for number, (_, steps) in enumerate(schedules):
            count = 1 + max(s.index for s in steps if isinstance(s, (Put, PutWrites)))
            runs.append((f"{THREAD}-{number}", steps, checkpoint_ids(count)))
        with at_fresh_location(locations) as site:
            seen = _run_schedules(site, savers, mode, runs)
            observer = _observer(site, savers)
            for (what, _), (thread, steps, ids), answers in zip(
                schedules, runs, seen, strict=True
            ):
                expected = oracle(steps, ids, thread)
                for number, (got, want) in enumerate(
                    zip(answers, expected, strict=True)
                ):
                    require(
                        got == want,
                        f"{what}, {mode}: read {number + 1} answered {got!r}; the "
                        f"stock saver answered {want!r} (schedule {list(steps)!r})",
                    )
                stored = stored_answers(observer.get_tuple, thread, ids, len(ids))
                want_stored = stored_oracle(steps, ids, len(ids))
                require(
                    stored == want_stored,
                    f"{what}, {mode}: the store holds {stored!r} afterwards; the "
                    f"stock saver holds {want_stored!r} (schedule {list(steps)!r})",
                )


def _judge_schedule(
    locations: LocationFactory, savers: Savers, steps: Sequence[Step], what: str
) -> None:
    _judge_schedules(locations, savers, [(what, steps)])


def _issue_order(locations: LocationFactory, savers: Savers) -> None:
    _judge_schedule(locations, savers, ISSUE_ORDER, "writes before their parent's put")


def _late_earlier_writes(locations: LocationFactory, savers: Savers) -> None:
    _judge_schedule(
        locations, savers, LATE_EARLIER_WRITES, "a late write on the step before"
    )


def _adversarial(locations: LocationFactory, savers: Savers) -> None:
    schedules = adversarial_schedules(SCHEDULES, 3, seed=39)
    _judge_schedules(
        locations,
        savers,
        [(f"adversarial schedule {n}", steps) for n, steps in enumerate(schedules)],
    )


def _concurrent(locations: LocationFactory, savers: Savers) -> None:
    """Writes submitted at once beside the chained puts, as LangGraph's executor does."""
    for seed, steps in enumerate(adversarial_schedules(4, 3, seed=40)):
        for asyncio_api in (False, True):
            ids = checkpoint_ids(3)
            with at_fresh_location(locations) as site:
                if asyncio_api:

                    async def body(
                        saver: Any,
                        steps: Sequence[Step] = steps,
                        ids: Sequence[str] = ids,
                        seed: int = seed,
                    ) -> Answer:
                        async with saver.hold(THREAD) as config:
                            await areplay_concurrently(saver, config, steps, ids, seed)
                            return answer(await saver.aget_tuple(config))

                    held_read = _with_async(site, savers, body)
                else:
                    saver = savers.sync(site.open(TTL_MS), "worker")
                    with saver.hold(THREAD) as config:
                        replay_concurrently(saver, config, steps, ids, seed)
                        held_read = answer(saver.get_tuple(config))
                stored = stored_answers(
                    _observer(site, savers).get_tuple, THREAD, ids, 3
                )
                want = stored_oracle(steps, ids, 3)
                api = "asyncio" if asyncio_api else "sync"
                require(
                    stored == want,
                    f"concurrent background writes ({api}, seed {seed}): the store "
                    f"holds {stored!r}; the stock saver holds {want!r}",
                )
                require(
                    held_read == want[0],
                    f"concurrent background writes ({api}, seed {seed}): the hold "
                    f"then read {held_read!r}; the store holds {want[0]!r}",
                )


# --- real graphs ----------------------------------------------------------------------


class Fan(TypedDict, total=False):
    done: Annotated[list[str], operator.add]
    answer: str
    confirmed: str


class Confirm(TypedDict, total=False):
    """The subgraph's state: one key it shares with its parent."""

    confirmed: str


class Calls:
    """How often each node body ran, across the invocations of one thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def ran(self, name: str) -> None:
        with self._lock:
            self.counts[name] += 1


def fan_graph(checkpointer: Any, calls: Calls) -> Any:
    """plan -> (3 x Send work, ask: interrupt) -> sub (a subgraph: confirm, interrupt)."""

    def plan(state: Fan) -> Fan:
        calls.ran("plan")
        return {"done": ["plan"]}

    def route(state: Fan) -> list[Any]:
        return [Send("work", {"i": i}) for i in range(3)] + ["ask"]

    def work(arg: dict[str, int]) -> Fan:
        calls.ran(f"work{arg['i']}")
        return {"done": [f"work{arg['i']}"]}

    def ask(state: Fan) -> Fan:
        calls.ran("ask")
        return {"answer": str(interrupt("question"))}

    def confirm(state: Confirm) -> Confirm:
        calls.ran("confirm")
        return {"confirmed": str(interrupt("confirm"))}

    inner = StateGraph(Confirm)
    inner.add_node("confirm", confirm)
    inner.add_edge(START, "confirm")
    inner.add_edge("confirm", END)
    graph = StateGraph(Fan)
    graph.add_node("plan", plan)
    graph.add_node("work", cast(Any, work))  # a Send's argument, not the state
    graph.add_node("ask", ask)
    graph.add_node("sub", inner.compile())
    graph.add_edge(START, "plan")
    graph.add_conditional_edges("plan", route, ["work", "ask"])
    graph.add_edge("work", "sub")
    graph.add_edge("ask", "sub")
    graph.add_edge("sub", END)
    return graph.compile(checkpointer=checkpointer)


INPUTS: Final[tuple[Any, ...]] = (
    {"done": []},
    Command(resume="yes"),
    Command(resume="ok"),
)
WAITING: Final = (("question",), ("confirm",), ())
"""The interrupts pending after each invocation."""
EXPECTED_RUNS: Final = Counter(
    {"plan": 1, "work0": 1, "work1": 1, "work2": 1, "ask": 2, "confirm": 2}
)
"""Node bodies run: each once, the interrupting ones once more when resumed."""


class PutsLate(BaseCheckpointSaver[Any]):
    """A saver whose checkpoint puts start late: LangGraph's pending writes,
    submitted beside them, land first. Everything else is the inner saver's."""

    def __init__(self, inner: Any) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.inner.get_next_version(current, channel)

    def get_tuple(self, config: Any) -> Any:
        return self.inner.get_tuple(config)

    def list(self, config: Any, **kwargs: Any) -> Iterator[Any]:
        return self.inner.list(config, **kwargs)  # type: ignore[no-any-return]

    def put(
        self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any
    ) -> Any:
        time.sleep(PUT_DELAY_S)
        return self.inner.put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self, config: Any, writes: Any, task_id: str, task_path: str = ""
    ) -> None:
        self.inner.put_writes(config, writes, task_id, task_path)

    async def aget_tuple(self, config: Any) -> Any:
        return await self.inner.aget_tuple(config)

    async def alist(self, config: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async for item in self.inner.alist(config, **kwargs):
            yield item

    async def aput(
        self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any
    ) -> Any:
        await asyncio.sleep(PUT_DELAY_S)
        return await self.inner.aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: Any, writes: Any, task_id: str, task_path: str = ""
    ) -> None:
        await self.inner.aput_writes(config, writes, task_id, task_path)


def _waiting(state: Any) -> tuple[str, ...]:
    return tuple(str(i.value) for i in state.interrupts)


def _judge_state(what: str, step: int, held: Any, observed: Any) -> None:
    require(
        _waiting(held) == WAITING[step],
        f"{what}, invocation {step + 1}: the invoking saver's get_state shows interrupts "
        f"{_waiting(held)!r}; expected {WAITING[step]!r}",
    )
    require(
        _waiting(observed) == WAITING[step] and observed.next == held.next,
        f"{what}, invocation {step + 1}: the store shows interrupts "
        f"{_waiting(observed)!r} and next {observed.next!r}; the invoking saver saw "
        f"{_waiting(held)!r} and {held.next!r}",
    )


def _judge_runs(what: str, calls: Calls, final: Any) -> None:
    require(
        calls.counts == EXPECTED_RUNS,
        f"{what}: node bodies ran {dict(calls.counts)!r}; expected "
        f"{dict(EXPECTED_RUNS)!r} (a lost pending write runs a finished task again "
        "or asks a question again)",
    )
    done = sorted(final.get("done", []))
    want = ["plan", "work0", "work1", "work2"]
    require(
        done == want
        and final.get("answer") == "yes"
        and final.get("confirmed") == "ok",
        f"{what}: the thread ended with {final!r}; expected done {want!r}, "
        "answer 'yes', confirmed 'ok'",
    )


def _real_graph(locations: LocationFactory, savers: Savers) -> None:
    """Threads run to their end, durability "async", checkpoint puts late.

    Even threads hold per invocation (the README's way), odd ones do not.
    """
    with at_fresh_location(locations) as site:
        saver = savers.sync(site.open(TTL_MS), "worker")
        observer = fan_graph(_observer(site, savers), Calls())
        for run in range(INVOCATIONS):
            thread, held = f"{THREAD}-g{run}", run % 2 == 0
            calls = Calls()
            graph = fan_graph(PutsLate(saver), calls)
            what = f"sync graph, thread {run} {'held' if held else 'unheld'}"
            final: Any = None
            for step, given in enumerate(INPUTS):
                with _held(saver, held, thread) as config:
                    final = graph.invoke(given, config, durability="async")
                    seen = graph.get_state(config)
                _judge_state(what, step, seen, observer.get_state(_config(thread)))
            _judge_runs(what, calls, final)

    with at_fresh_location(locations) as site:
        aobserver = fan_graph(_observer(site, savers), Calls())

        async def body(saver: Any) -> None:
            for run in range(INVOCATIONS):
                thread, held = f"{THREAD}-a{run}", run % 2 == 0
                calls = Calls()
                graph = fan_graph(PutsLate(saver), calls)
                what = f"asyncio graph, thread {run} {'held' if held else 'unheld'}"
                final: Any = None
                for step, given in enumerate(INPUTS):
                    async with _aheld(saver, held, thread) as config:
                        final = await graph.ainvoke(given, config, durability="async")
                        seen = await graph.aget_state(config)
                    observed = await asyncio.to_thread(
                        aobserver.get_state, _config(thread)
                    )
                    _judge_state(what, step, seen, observed)
                _judge_runs(what, calls, final)

        _with_async(site, savers, body)


# --- memory across holds and checkpoints ------------------------------------------------


def _hold_to_hold(locations: LocationFactory, savers: Savers) -> None:
    """A hold's memory ends with it: another worker's writes in between are seen."""
    ids = checkpoint_ids(3)
    with at_fresh_location(locations, needs=("shared",)) as site:
        a = savers.sync(site.open(TTL_MS), "worker-a")
        b = savers.sync(site.open(TTL_MS), "worker-b")
        first: list[Step] = [Read(), Put(0), PutWrites(0, "a1", (("a", 1),)), Read()]
        with a.hold(THREAD) as config:
            replay(a, config, first, ids)
        with b.hold(THREAD) as config:
            replay(
                b,
                config,
                [
                    Read(),
                    PutWrites(0, "b1", (("b", 1),)),
                    Put(1),
                    PutWrites(1, "b2", (("b", 2),)),
                ],
                ids,
            )
        with a.hold(THREAD) as config:
            seen = replay(
                a,
                config,
                [Read(), ReadAt(0), PutWrites(1, "a2", (("a", 2),)), Read()],
                ids,
            )
        steps: list[Step] = [
            Put(0),
            PutWrites(0, "a1", (("a", 1),)),
            PutWrites(0, "b1", (("b", 1),)),
            Put(1),
            PutWrites(1, "b2", (("b", 2),)),
            Read(),
            ReadAt(0),
            PutWrites(1, "a2", (("a", 2),)),
            Read(),
        ]
        want = oracle(steps, ids, THREAD)
        require(
            seen == want,
            f"worker A's second hold read {seen!r} after worker B's hold wrote; "
            f"the store holds {want!r}",
        )
        stored = stored_answers(_observer(site, savers).get_tuple, THREAD, ids, 2)
        want_stored = stored_oracle(steps, ids, 2)
        require(
            stored == want_stored,
            f"after holds of two workers the store holds {stored!r}; expected {want_stored!r}",
        )


def _right_checkpoint(locations: LocationFactory, savers: Savers) -> None:
    """A read of a named checkpoint inside a hold answers for that checkpoint."""
    steps: list[Step] = [
        Read(),
        Put(0),
        PutWrites(0, "t0", (("a", 0),)),
        Put(1),
        PutWrites(1, "t1", (("a", 1),)),
        ReadAt(0),
        Read(),
        PutWrites(0, "t0b", (("b", 0),)),
        Read(),
        ReadAt(0),
        ReadAt(1),
    ]
    _judge_schedule(locations, savers, steps, "reads of named checkpoints")


# --- string channel versions -----------------------------------------------------------


def _copy_stock_thread(stock: InMemorySaver, saver: Any, config: Any) -> None:
    """Put every checkpoint of the stock thread, oldest first, with its writes."""
    for item in sorted(
        stock.list(_config()), key=lambda t: t.config["configurable"]["checkpoint_id"]
    ):
        ns = item.config["configurable"]["checkpoint_ns"]
        parent = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        target = {
            **config,
            "configurable": {**config["configurable"], "checkpoint_ns": ns},
        }
        if parent is not None:
            target["configurable"]["checkpoint_id"] = parent
        stored = saver.put(target, item.checkpoint, item.metadata, {})
        at = {
            **target,
            "configurable": {**target["configurable"], **stored["configurable"]},
        }
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task, channel, value in item.pending_writes or []:
            by_task.setdefault(task, []).append((channel, value))
        for task, writes in by_task.items():
            saver.put_writes(at, writes, task)


def _string_versions(locations: LocationFactory, savers: Savers) -> None:
    """A thread a stock saver wrote (string channel versions) continues here."""
    stock = InMemorySaver()
    stock_calls = Calls()
    fan_graph(stock, stock_calls).invoke(INPUTS[0], _config(), durability="sync")
    with at_fresh_location(locations) as site:
        saver = savers.sync(site.open(TTL_MS), "worker")
        calls = Calls()
        graph = fan_graph(saver, calls)
        final: Any = None
        with saver.hold(THREAD) as config:
            _copy_stock_thread(stock, saver, config)
            try:
                for given in INPUTS[1:]:
                    final = graph.invoke(given, config)
            except NotImplementedError as exc:
                require(
                    False,
                    f"continuing a stock saver's thread raised {exc!r} "
                    "(string channel versions the saver cannot advance?)",
                )
        calls.counts.update(stock_calls.counts)
        _judge_runs("a stock saver's thread continued", calls, final)
        latest = saver.get_tuple(_config())
        versions = latest.checkpoint["channel_versions"] if latest else {}
        require(
            versions and all(isinstance(v, str) for v in versions.values()),
            f"the continued thread's channel versions are {versions!r}: a thread of "
            "string versions must stay one (LangGraph takes the max over its channels)",
        )


OrderBody = Callable[[LocationFactory, Savers], None]

CHECKS: Final[tuple[tuple[str, str, tuple[str, ...], OrderBody], ...]] = (
    (
        "lg-orders-issue-order",
        "pending writes that land before their checkpoint's parent are kept",
        ("G15",),
        _issue_order,
    ),
    (
        "lg-orders-late-earlier-writes",
        "a late write on the step before does not hide the step's writes",
        ("G15",),
        _late_earlier_writes,
    ),
    (
        "lg-orders-adversarial",
        "seeded LangGraph-legal orders of puts and writes agree with the stock saver",
        ("G15",),
        _adversarial,
    ),
    (
        "lg-orders-concurrent",
        "writes submitted at once beside chained puts all land, sync and asyncio",
        ("G15", "G18"),
        _concurrent,
    ),
    (
        "lg-orders-real-graph",
        "real graphs with durability='async' keep interrupts and Send results per hold",
        ("G15",),
        _real_graph,
    ),
    (
        "lg-orders-hold-to-hold",
        "a hold's memory ends with it: another worker's writes are seen",
        ("G18",),
        _hold_to_hold,
    ),
    (
        "lg-orders-right-checkpoint",
        "a read of a named checkpoint in a hold answers for that checkpoint",
        ("G18",),
        _right_checkpoint,
    ),
    (
        "lg-orders-string-versions",
        "a thread of a stock saver (string channel versions) continues",
        ("G16",),
        _string_versions,
    ),
)


def _with_default_savers(body: OrderBody) -> Callable[[LocationFactory], None]:
    """A check body over the honest savers, as the ``langgraph`` suite runs its rows."""
    return lambda locations: body(locations, Savers())


KIT_CHECKS: Final = tuple(
    (check_id, title, clauses, _with_default_savers(body))
    for check_id, title, clauses, body in CHECKS
)
"""The rows as ``rulvar check --suite langgraph`` takes them (``suites.langgraph``)."""


def langgraph_orders_conformance(
    certification: Certification, savers: Savers | None = None
) -> ConformanceSuite:
    """The write-orders suite over fresh locations of one backend (G15, G16, G18)."""
    chosen = savers or Savers()
    locations = certification.locations
    return ConformanceSuite(
        "langgraph-orders",
        tuple(
            build_check(check_id, title, clauses, partial(body, locations, chosen))
            for check_id, title, clauses, body in CHECKS
        ),
    )
