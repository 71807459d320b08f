"""The fenced LangGraph savers beside LangGraph's own, in one run, at equal durability.

Run: ``python bench/bench_langgraph.py [--reps 3] [--ops 200] [--graphs 8]
[--url POSTGRES_URL] [--skip-postgres]`` (needs ``rulvar-stores[bench,langgraph]``;
URL defaults to ``RULVAR_TEST_POSTGRES_URL``, then
``postgresql://postgres@127.0.0.1:5432/test``).

Per repetition every variant of a figure runs in alternating chunks (load swings
on a shared machine hit all alike) and the ratio ours / theirs is taken inside
the repetition; the summary prints each repetition's ratio and the median.
Before the sync figures' clocks start each side writes past SQLite's first WAL
checkpoint (``WARM_WRITES`` puts, ``WARM_INVOCATIONS`` invocations): the steady
state of a long-running worker, not the first minutes of a new WAL file, whose
growing flushes cost both sides alike and bring every ratio towards 1.

- ``put`` / ``put_writes`` (sync) and ``aput`` / ``aput_writes`` (asyncio) of a
  small chained checkpoint: ``RulvarSaver`` inside a hold against ``SqliteSaver``
  / ``AsyncSqliteSaver`` (WAL, synchronous=FULL, read back) and ``PostgresSaver``
  / ``AsyncPostgresSaver`` (synchronous_commit read back). Our unheld ``put``
  (a brief lease around the write) is printed too, and each sync call's client
  CPU (the calling thread's, in µs), where ours pays its fence check, group-commit
  door and argument checks. Unheld puts on threads that already hold 2,000
  checkpoints, ours against theirs: ours must not slow as a thread grows.
  ``--only puts`` runs these alone.
- One worker's whole invocations of a real 4-node graph, one after another, each
  on a new thread (``durability="sync"``, so every step's checkpoint is written
  before the next): ours inside a hold (acquire, the invocation's writes, the
  hold's outcome and release), beside LangGraph's saver invoked plainly; sync
  and asyncio. The sync held figure is split in two: the invocation inside the
  hold against theirs, and the time entering and leaving the hold (its acquire,
  its outcome and release). Our invocation outside a hold (a brief lease per
  write) is printed too. ``--only invocations`` runs these alone (short runs on a shared
  machine).
- 16 threads of a real 3-node graph invoked concurrently through ONE async saver
  (each invocation in a hold; ``durability="sync"``): aggregate invocations/s.
  Each saver first runs one untimed round (our pool grows to the concurrency
  there, as a serving process's does once). The client CPU per invocation is
  printed beside: on a 2-core machine the client's one event-loop thread is
  the bottleneck of both sides, so the ratio follows it.
- The first ``get_tuple`` of a thread's latest checkpoint from a FRESH saver
  on threads of 20 and 2,000 checkpoints, timed two ways, each the same way on
  both sides (the median of 3 fresh savers per repetition):
  ``open + first read``: from nothing open to the tuple, as a new process does
  it: ours enters ``from_url`` (connecting and the boot check happen inside,
  lazily), theirs connects and builds the saver (no ``setup()``: a schema set
  up once needs none). ``first read, connected``: the saver is open and has
  talked to the database once before the clock starts (theirs ``setup()``,
  ours a ``get_meta`` of another run: each connects, and ours boots), then
  ``get_tuple`` alone is timed.

The async saver runs on whatever ``open_store_async`` serves for the URL (a
native asyncio store where the backend registers one, else the generic
thread-hop adapter); the script prints which.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import secrets
import sqlite3
import statistics
import sys
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterator
from contextlib import (
    AbstractContextManager,
    AsyncExitStack,
    ExitStack,
    contextmanager,
)
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint

# The project root, so the sibling module imports as ``bench.peer_savers``.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.peer_savers import require_langgraph_savers
from rulvar_conformance.suites.langgraph_ownership import Trail, three_node_graph
from rulvar_langgraph import AsyncRulvarSaver, RulvarSaver

Op = Callable[[int], object]
AOp = Callable[[int], Awaitable[object]]
CONCURRENT = 16
CPU_MS: list[float] = []  # the last concurrent_graphs runs' CPU ms per invocation
SHORT, LONG = 20, 2_000
# Writes (and invocations) each side makes before its clock starts, so that every
# SQLite database is past its first WAL checkpoint (1,000 pages): a new WAL file
# grows with each commit and a growing file's flush costs more, which hides the
# per-call differences a long-running worker, whose WAL is recycled, sees.
WARM_WRITES, WARM_INVOCATIONS = 1_500, 150


class Chain:
    """Chained small checkpoints and their writes on one thread of one saver."""

    def __init__(self, saver: Any, config: dict[str, Any]) -> None:
        self.saver = saver
        self.config = config

    def _checkpoint(self, i: int) -> tuple[Any, dict[str, Any], dict[str, int]]:
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"data": {"seq": i, "pad": "x" * 400}, "n": i}
        checkpoint["channel_versions"] = {"data": i + 1, "n": i + 1}
        return checkpoint, {"source": "loop", "step": i}, {"data": i + 1, "n": i + 1}

    def _at(self, stored: Any) -> dict[str, Any]:
        return {
            **self.config,
            "configurable": {**self.config["configurable"], **stored["configurable"]},
        }

    def put(self, i: int) -> None:
        self.config = self._at(self.saver.put(self.config, *self._checkpoint(i)))

    def put_writes(self, i: int) -> None:
        self.saver.put_writes(
            self.config, [("data", {"seq": i}), ("n", i)], f"task-{i}"
        )

    async def aput(self, i: int) -> None:
        self.config = self._at(await self.saver.aput(self.config, *self._checkpoint(i)))

    async def aput_writes(self, i: int) -> None:
        await self.saver.aput_writes(
            self.config, [("data", {"seq": i}), ("n", i)], f"task-{i}"
        )


def thread_config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def four_node_graph(saver: Any) -> Any:
    """a -> b -> c -> d, each node appending its name: LangGraph's work, not the node's."""
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(Trail)
    names = ("a", "b", "c", "d")
    for name in names:
        graph.add_node(name, lambda state, name=name: {"trail": [name]})
    for before, after in zip((START, *names), (*names, END), strict=True):
        graph.add_edge(before, after)
    return graph.compile(checkpointer=saver)


def invocation_figures(side: Side, invocations: int) -> dict[str, float]:
    """Whole 4-node invocations, one worker, sync: ours held (and unheld) / theirs."""
    theirs = side.theirs_sync()
    with (
        closing_theirs(side, theirs),
        RulvarSaver.from_url(side.ours_url, owner="bench") as ours,
    ):
        mine, their_graph = four_node_graph(ours), four_node_graph(theirs)
        tag = secrets.token_hex(3)
        # The hold's own share of a held invocation: seconds spent entering
        # (the acquire) and leaving it (the outcome and release), and holds.
        hold_ends = {"seconds": 0.0, "holds": 0}

        def held(i: int) -> None:
            began = time.perf_counter()
            with ours.hold(f"inv-{tag}-{i}") as config:
                entered = time.perf_counter()
                mine.invoke({"trail": []}, config, durability="sync")
                invoked = time.perf_counter()
            hold_ends["seconds"] += entered - began + time.perf_counter() - invoked
            hold_ends["holds"] += 1

        def unheld(i: int) -> None:
            config = thread_config(f"uinv-{tag}-{i}")
            mine.invoke({"trail": []}, config, durability="sync")

        def plain(i: int) -> None:
            config = thread_config(f"tinv-{tag}-{i}")
            their_graph.invoke({"trail": []}, config, durability="sync")

        # Imports, the executor's threads, prepared statements, a recycled WAL.
        for warm in range(WARM_INVOCATIONS):
            held(-1 - warm)
            unheld(-1 - warm)
            plain(-1 - warm)
        hold_ends.update(seconds=0.0, holds=0)
        rates = interleaved(
            {"held": held, "unheld": unheld, "theirs": plain}, invocations
        )
    hold_s = hold_ends["seconds"] / hold_ends["holds"]
    return {
        "4-node invocation, held (time ratio)": rates["theirs"] / rates["held"],
        # Split in two: the invocation inside the hold, and the hold's own
        # acquire and end (which LangGraph's saver, owning nothing, skips).
        "  of it, the invocation alone (time ratio)": (1 / rates["held"] - hold_s)
        * rates["theirs"],
        "  of it, entering and leaving the hold (ms)": 1000 * hold_s,
        "4-node invocation, unheld (time ratio)": rates["theirs"] / rates["unheld"],
        "4-node invocation, theirs (ms)": 1000 / rates["theirs"],
    }


async def async_invocation_figures(side: Side, invocations: int) -> dict[str, float]:
    """``invocation_figures`` through the asyncio savers."""
    async with AsyncExitStack() as stack:
        theirs = await side.theirs_async(stack)
        ours = await stack.enter_async_context(
            AsyncRulvarSaver.from_url(side.ours_async_url, owner="bench")
        )
        mine, their_graph = four_node_graph(ours), four_node_graph(theirs)
        tag = secrets.token_hex(3)

        async def held(i: int) -> None:
            async with ours.hold(f"ainv-{tag}-{i}") as config:
                await mine.ainvoke({"trail": []}, config, durability="sync")

        async def plain(i: int) -> None:
            config = thread_config(f"atinv-{tag}-{i}")
            await their_graph.ainvoke({"trail": []}, config, durability="sync")

        for warm in range(WARM_INVOCATIONS):
            await held(-1 - warm)
            await plain(-1 - warm)
        rates = await ainterleaved({"held": held, "theirs": plain}, invocations)
    return {
        "async 4-node invocation, held (time ratio)": rates["theirs"] / rates["held"],
        "async 4-node invocation, theirs (ms)": 1000 / rates["theirs"],
    }


def interleaved(
    variants: dict[str, Op],
    ops: int,
    chunks: int = 10,
    cpu_us: dict[str, float] | None = None,
) -> dict[str, float]:
    """Ops/s of every variant in rotating chunks; cyclic GC between chunks.

    ``cpu_us``, when given, receives each variant's CPU per op in µs: the calling
    thread's (``time.thread_time``), where a sync saver with one caller does its
    work, its commit's leader included.
    """
    spent = dict.fromkeys(variants, 0.0)
    cpu = dict.fromkeys(variants, 0.0)
    names, size, done = list(variants), max(1, ops // chunks), 0
    gc.disable()
    try:
        for turn in range(chunks):
            for name in names[turn % len(names) :] + names[: turn % len(names)]:
                gc.collect()
                began, began_cpu = time.perf_counter(), time.thread_time()
                for i in range(done, done + size):
                    variants[name](i)
                spent[name] += time.perf_counter() - began
                cpu[name] += time.thread_time() - began_cpu
            done += size
    finally:
        gc.enable()
    if cpu_us is not None:
        cpu_us.update(
            {name: 1e6 * used / (chunks * size) for name, used in cpu.items()}
        )
    return {name: chunks * size / seconds for name, seconds in spent.items()}


async def ainterleaved(
    variants: dict[str, AOp], ops: int, chunks: int = 10
) -> dict[str, float]:
    """``interleaved`` for coroutines, awaited one at a time."""
    spent = dict.fromkeys(variants, 0.0)
    names, size, done = list(variants), max(1, ops // chunks), 0
    for turn in range(chunks):
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            began = time.perf_counter()
            for i in range(done, done + size):
                await variants[name](i)
            spent[name] += time.perf_counter() - began
        done += size
    return {name: chunks * size / seconds for name, seconds in spent.items()}


async def concurrent_graphs(saver: Any, rounds: int, held: bool) -> float:
    """Invocations/s of CONCURRENT threads of a 3-node graph through one saver, warm.

    ``CPU_MS`` gets this process's CPU time per invocation (all its threads):
    on a small machine the figure is bounded by it, not by the database.
    """
    graph = three_node_graph(saver, "bench")

    async def one(thread: str) -> None:
        if held:
            async with saver.hold(thread) as config:
                await graph.ainvoke({"trail": []}, config, durability="sync")
        else:
            await graph.ainvoke({"trail": []}, thread_config(thread), durability="sync")

    async def round_of(tag: str) -> None:
        await asyncio.gather(
            *(one(f"graph-{tag}-{n}-{secrets.token_hex(2)}") for n in range(CONCURRENT))
        )

    # Untimed: a pool grows to the concurrency on the first round (a new
    # connection per caller that finds none idle), which a serving process
    # pays once, not per invocation.
    await round_of("warm")
    began, cpu_began = time.perf_counter(), time.process_time()
    for round_no in range(rounds):
        await round_of(str(round_no))
    invocations = rounds * CONCURRENT
    CPU_MS.append((time.process_time() - cpu_began) * 1000 / invocations)
    return invocations / (time.perf_counter() - began)


def first_read_ms(
    open_saver: Callable[[], Any], warm: Callable[[Any], None] | None, thread: str
) -> float:
    """Milliseconds to a brand-new saver's first latest-checkpoint read.

    Without ``warm`` the clock includes opening the saver (``open_saver`` enters
    it); with it, ``warm(saver)`` runs first, outside the clock.
    """
    with ExitStack() as stack:
        began = time.perf_counter()
        saver = stack.enter_context(open_saver())
        if warm is not None:
            warm(saver)
            began = time.perf_counter()
        found = saver.get_tuple(thread_config(thread))
        elapsed = (time.perf_counter() - began) * 1000
    assert found is not None
    return elapsed


# -- one backend pair -------------------------------------------------------------------


class Side(ABC):
    """Our saver and LangGraph's on one backend, both sync and async.

    Each side's savers live the same way: the sync figures open both savers
    and close both at the end of the repetition, the async ones do the same
    on a location of their own (SQLite: one file per side and API; nothing is
    held open between repetitions). On SQLite that matters: the last
    connection closing checkpoints the file and deletes its WAL, and a side
    whose WAL stays open between repetitions writes into a WAL file that
    already has its blocks, a cheaper fdatasync than one that grows it.
    """

    name: str
    ours_url: str
    ours_async_url: str

    @abstractmethod
    def theirs_sync(self) -> Any:
        """LangGraph's sync saver, set up."""

    def close_theirs(self, saver: Any) -> None:
        """Close what ``theirs_sync`` opened (ours closes through ``from_url``)."""
        saver.conn.close()

    @abstractmethod
    def theirs_opened(self) -> AbstractContextManager[Any]:
        """LangGraph's sync saver on a new connection, NOT set up (an existing schema)."""

    @abstractmethod
    async def theirs_async(self, stack: AsyncExitStack) -> Any:
        """LangGraph's async saver, set up, closed by ``stack``."""

    @abstractmethod
    def durability(self) -> list[str]:
        """Each side's durability setting, read back."""


class SqliteSide(Side):
    name = "SQLite"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.ours_url = f"sqlite:///{directory / 'ours.db'}?synchronous=FULL"
        # The async figures' file, as LangGraph's async saver has its own.
        self.ours_async_url = (
            f"sqlite:///{directory / 'ours-async.db'}?synchronous=FULL"
        )

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.directory / "theirs.db", check_same_thread=False)

    def theirs_sync(self) -> Any:
        """A new saver on a new connection (fresh: nothing cached)."""
        from langgraph.checkpoint.sqlite import SqliteSaver

        saver = SqliteSaver(self._connect())
        saver.setup()
        return saver

    @contextmanager
    def theirs_opened(self) -> Iterator[Any]:
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = self._connect()
        try:
            yield SqliteSaver(conn)
        finally:
            conn.close()

    async def theirs_async(self, stack: AsyncExitStack) -> Any:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        saver = await stack.enter_async_context(
            AsyncSqliteSaver.from_conn_string(str(self.directory / "theirs-async.db"))
        )
        await saver.setup()
        return saver

    def durability(self) -> list[str]:
        # Read back on the saver's own connection after its setup() (which
        # switches the file to WAL): synchronous is per connection, here stdlib
        # sqlite3's compiled-in default, which the saver never sets. The other
        # settings that change what a commit or a checkpoint costs are shown
        # too, so a difference between the sides is seen, not assumed away.
        saver = self.theirs_sync()
        try:
            theirs = "SqliteSaver: " + _pragmas(
                lambda name: saver.conn.execute(f"PRAGMA {name}").fetchone()[0]
            )
        finally:
            self.close_theirs(saver)
        with RulvarSaver.from_url(self.ours_url, owner="probe") as ours_saver:
            conn = ours_saver.journal._conn  # type: ignore[attr-defined]  # read back only
            ours = "RulvarSaver: " + _pragmas(
                lambda name: conn.execute(f"PRAGMA {name}").fetchall()[0][0]
            )
        return [theirs + " (2 = FULL)", ours + " (2 = FULL)"]


SQLITE_PRAGMAS = (
    "journal_mode",
    "synchronous",
    "wal_autocheckpoint",
    "journal_size_limit",
    "cache_size",
    "mmap_size",
    "temp_store",
    "page_size",
    "secure_delete",
)


def _pragmas(read: Callable[[str], object]) -> str:
    """``name=value`` of every ``SQLITE_PRAGMAS`` setting, through ``read``."""
    return " ".join(f"{name}={read(name)}" for name in SQLITE_PRAGMAS)


class PostgresSide(Side):
    name = "PostgreSQL"

    def __init__(self, url: str) -> None:
        import psycopg

        self.url = url
        self.ours_schema = f"lgbench_ours_{secrets.token_hex(3)}"
        self.theirs_schema = f"lgbench_theirs_{secrets.token_hex(3)}"
        self.ours_url = f"{url}{'&' if '?' in url else '?'}schema={self.ours_schema}"
        self.ours_async_url = self.ours_url
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{self.theirs_schema}"')

    def _theirs_kwargs(self) -> dict[str, Any]:
        from psycopg.rows import dict_row

        return {
            "autocommit": True,
            "prepare_threshold": 0,
            "row_factory": dict_row,
            "options": f"-c search_path={self.theirs_schema}",
        }

    def theirs_sync(self) -> Any:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver

        saver = PostgresSaver(psycopg.connect(self.url, **self._theirs_kwargs()))
        saver.setup()
        return saver

    @contextmanager
    def theirs_opened(self) -> Iterator[Any]:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver

        with psycopg.connect(self.url, **self._theirs_kwargs()) as conn:
            yield PostgresSaver(conn)

    async def theirs_async(self, stack: AsyncExitStack) -> Any:
        import psycopg
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        conn = await psycopg.AsyncConnection.connect(self.url, **self._theirs_kwargs())
        stack.push_async_callback(conn.close)
        saver = AsyncPostgresSaver(conn)
        await saver.setup()
        return saver

    def durability(self) -> list[str]:
        import psycopg

        with psycopg.connect(self.url) as conn:
            row = conn.execute("SHOW synchronous_commit").fetchone()
            fsync = conn.execute("SHOW fsync").fetchone()
        return [
            f"server (both savers): synchronous_commit={row and row[0]} fsync={fsync and fsync[0]}"
        ]

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            for schema in (self.ours_schema, self.theirs_schema):
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextmanager
def closing_theirs(side: Side, saver: Any) -> Iterator[Any]:
    """Close LangGraph's sync saver at exit, as ``from_url`` closes ours."""
    try:
        yield saver
    finally:
        side.close_theirs(saver)


def sync_figures(side: Side, ops: int) -> dict[str, float]:
    theirs = side.theirs_sync()
    with (
        closing_theirs(side, theirs),
        RulvarSaver.from_url(side.ours_url, owner="bench") as ours,
    ):
        held_thread, theirs_thread = (
            f"held-{secrets.token_hex(3)}",
            f"t-{secrets.token_hex(3)}",
        )
        with ours.hold(held_thread) as held:
            mine = Chain(ours, dict(held))
            brief = Chain(ours, thread_config(f"brief-{secrets.token_hex(3)}"))
            them = Chain(theirs, thread_config(theirs_thread))
            for warm in range(-WARM_WRITES, 0):
                mine.put(warm)
                brief.put(warm)
                them.put(warm)
            put_cpu: dict[str, float] = {}
            writes_cpu: dict[str, float] = {}
            puts = interleaved(
                {"ours": mine.put, "brief": brief.put, "theirs": them.put},
                ops,
                cpu_us=put_cpu,
            )
            writes = interleaved(
                {"ours": mine.put_writes, "theirs": them.put_writes},
                ops,
                cpu_us=writes_cpu,
            )
    return {
        "put": puts["ours"] / puts["theirs"],
        "put (unheld, brief lease)": puts["brief"] / puts["theirs"],
        "put_writes": writes["ours"] / writes["theirs"],
        "put, client CPU ours, held (us)": put_cpu["ours"],
        "put, client CPU theirs (us)": put_cpu["theirs"],
        "put_writes, client CPU ours, held (us)": writes_cpu["ours"],
        "put_writes, client CPU theirs (us)": writes_cpu["theirs"],
    }


def long_thread_figures(side: Side, ops: int) -> dict[str, float]:
    """Unheld puts on threads that already hold LONG checkpoints, ours / theirs.

    Each unheld put of ours asks whether its thread had a checkpoint before (a
    new thread's meta is written with the first); that question must cost the
    same on a long thread as on a new one.
    """
    theirs = side.theirs_sync()
    with (
        closing_theirs(side, theirs),
        RulvarSaver.from_url(side.ours_url, owner="bench") as ours,
    ):
        tag = secrets.token_hex(3)
        mine = Chain(ours, thread_config(f"long-brief-{tag}"))
        them = Chain(theirs, thread_config(f"long-t-{tag}"))
        for i in range(LONG):
            mine.put(i)
            them.put(i)
        puts = interleaved({"ours": mine.put, "theirs": them.put}, ops)
    return {
        f"put (unheld) on a {LONG}-checkpoint thread": puts["ours"] / puts["theirs"]
    }


async def async_figures(
    side: Side, ops: int, rounds: int
) -> tuple[dict[str, float], str]:
    async with AsyncExitStack() as stack:
        theirs = await side.theirs_async(stack)
        ours = await stack.enter_async_context(
            AsyncRulvarSaver.from_url(side.ours_async_url, owner="bench")
        )
        served_by = type(ours.journal).__name__
        held = await stack.enter_async_context(
            ours.hold(f"aheld-{secrets.token_hex(3)}")
        )
        mine, them = (
            Chain(ours, dict(held)),
            Chain(theirs, thread_config(f"at-{secrets.token_hex(3)}")),
        )
        await mine.aput(-1)
        await them.aput(-1)
        puts = await ainterleaved({"ours": mine.aput, "theirs": them.aput}, ops)
        writes = await ainterleaved(
            {"ours": mine.aput_writes, "theirs": them.aput_writes}, ops
        )
        CPU_MS.clear()
        graphs_theirs = await concurrent_graphs(theirs, rounds, held=False)
        graphs_ours = await concurrent_graphs(ours, rounds, held=True)
        graphs_theirs = (
            graphs_theirs + await concurrent_graphs(theirs, rounds, held=False)
        ) / 2
        cpu_theirs, cpu_ours = (CPU_MS[0] + CPU_MS[2]) / 2, CPU_MS[1]
    return {
        "aput": puts["ours"] / puts["theirs"],
        "aput_writes": writes["ours"] / writes["theirs"],
        f"{CONCURRENT} concurrent 3-node graphs": graphs_ours / graphs_theirs,
        "ours graphs: client CPU per invocation (ms)": cpu_ours,
        "theirs graphs: client CPU per invocation (ms)": cpu_theirs,
    }, served_by


def median_first_read_ms(
    open_saver: Callable[[], Any], warm: Callable[[Any], None] | None, thread: str
) -> float:
    """The median of 3 ``first_read_ms``, each with a new saver."""
    return statistics.median(first_read_ms(open_saver, warm, thread) for _ in range(3))


def latest_read_figures(side: Side) -> dict[str, float]:
    """Both sides' first read from a fresh saver, at SHORT and LONG checkpoints, in ms."""
    figures: dict[str, float] = {}
    ours_threads: dict[int, str] = {}
    theirs_threads: dict[int, str] = {}
    with RulvarSaver.from_url(side.ours_url, owner="bench") as writer:
        for length in (SHORT, LONG):
            ours_threads[length] = thread = f"long-{length}-{secrets.token_hex(3)}"
            with writer.hold(thread) as held:
                chain = Chain(writer, dict(held))
                for i in range(length):
                    chain.put(i)
    theirs_writer = side.theirs_sync()
    with closing_theirs(side, theirs_writer):
        for length in (SHORT, LONG):
            theirs_threads[length] = thread = f"tlong-{length}-{secrets.token_hex(3)}"
            chain = Chain(theirs_writer, thread_config(thread))
            for i in range(length):
                chain.put(i)

    def ours_opened() -> AbstractContextManager[RulvarSaver]:
        return RulvarSaver.from_url(side.ours_url, owner="reader")

    def ours_warm(saver: RulvarSaver) -> None:
        saver.journal.get_meta("bench-warm-up")  # type: ignore[attr-defined]  # check_stores saw get_meta

    def theirs_warm(saver: Any) -> None:
        saver.setup()

    for length in (SHORT, LONG):
        for label, warm in (
            ("open + first read", False),
            ("first read, connected", True),
        ):
            figures[f"ours {label}, {length} ckpts (ms)"] = median_first_read_ms(
                ours_opened, ours_warm if warm else None, ours_threads[length]
            )
            figures[f"theirs {label}, {length} ckpts (ms)"] = median_first_read_ms(
                side.theirs_opened,
                theirs_warm if warm else None,
                theirs_threads[length],
            )
    return figures


def run_side(
    side: Side, reps: int, ops: int, rounds: int, only: str, invocations: int
) -> None:
    print(f"\n== {side.name}")
    for line in side.durability():
        print(f"  durability read back: {line}")
    ratios: dict[str, list[float]] = {}
    for rep in range(reps):
        figures: dict[str, float] = {}
        served_by = "-"
        if only in ("all", "invocations"):
            figures.update(invocation_figures(side, invocations))
            figures.update(asyncio.run(async_invocation_figures(side, invocations)))
        if only in ("all", "puts"):
            figures.update(sync_figures(side, ops))
            figures.update(long_thread_figures(side, ops))
        if only == "all":
            async_part, served_by = asyncio.run(async_figures(side, ops, rounds))
            figures.update(async_part)
            figures.update(latest_read_figures(side))
        for name, value in figures.items():
            ratios.setdefault(name, []).append(value)
        if served_by != "-":
            print(f"  rep {rep + 1}: async saver served by {served_by}")
    for name, values in ratios.items():
        shown = ", ".join(f"{v:.2f}" for v in values)
        unit = "" if "(ms)" in name or "(us)" in name else "x"
        if "(time ratio)" in name:  # ours' time / theirs': at most 1.0x is the target
            unit = "x time"
        print(f"  {name:48s} median {statistics.median(values):7.2f}{unit}  [{shown}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument(
        "--graphs", type=int, default=8, help="rounds of 16 invocations"
    )
    parser.add_argument(
        "--url",
        default=os.environ.get("RULVAR_TEST_POSTGRES_URL")
        or "postgresql://postgres@127.0.0.1:5432/test",
    )
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument(
        "--only",
        choices=("all", "invocations", "puts"),
        default="all",
        help="only the whole-invocation figures, or only the sync put figures",
    )
    parser.add_argument(
        "--invocations", type=int, default=100, help="whole invocations per variant"
    )
    args = parser.parse_args()
    require_langgraph_savers()
    print(
        f"ratios are ours / LangGraph's per repetition; {args.reps} reps x {args.ops} ops"
    )
    with ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        run_side(
            SqliteSide(directory),
            args.reps,
            args.ops,
            args.graphs,
            args.only,
            args.invocations,
        )
    if not args.skip_postgres:
        side = PostgresSide(args.url)
        try:
            run_side(
                side, args.reps, args.ops, args.graphs, args.only, args.invocations
            )
        finally:
            side.drop()


if __name__ == "__main__":
    main()
