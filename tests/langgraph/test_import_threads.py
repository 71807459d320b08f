"""Threads of LangGraph's stock savers brought in and continued (G16, G17).

Each stock saver (InMemorySaver, SqliteSaver, AsyncSqliteSaver, PostgresSaver,
AsyncPostgresSaver) runs a real graph (Send fan-out, an interrupt, a subgraph
with an interrupt) through two invocations; ``import_threads`` copies the thread
into our saver over each backend, and our saver resumes it to the end. The
stock savers write string channel versions, which our savers must continue.
"""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from rulvar_conformance.suites.langgraph_orders import (
    EXPECTED_RUNS,
    INPUTS,
    Calls,
    fan_graph,
)
from rulvar_langgraph import (
    AsyncRulvarSaver,
    RulvarSaver,
    aimport_threads,
    import_threads,
)
from rulvar_langgraph._core import next_version
from rulvar_store import InvalidArgumentError, LeaseHeldError, OpenedStore
from rulvar_store.backend import LocationFactory, adapt_opened
from tests._postgres_gate import postgres_url

THREAD = "imported"
OTHER = "also-imported"


@contextmanager
def _schema_url() -> Iterator[str]:
    """The test server's URL with a fresh schema first on the search path."""
    url = postgres_url()
    schema = f"lgstock_{secrets.token_hex(6)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        sep = "&" if "?" in url else "?"
        yield f"{url}{sep}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@contextmanager
def stock_saver(name: str, tmp_path: Path) -> Iterator[Any]:
    """A sync stock saver on a fresh location."""
    if name == "memory":
        yield InMemorySaver()
    elif name == "sqlite":
        conn = sqlite3.connect(tmp_path / "stock.db", check_same_thread=False)
        try:
            yield SqliteSaver(conn)
        finally:
            conn.close()
    else:
        with _schema_url() as url, PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            yield saver


@asynccontextmanager
async def astock_saver(name: str, tmp_path: Path) -> AsyncIterator[Any]:
    """An asyncio stock saver on a fresh location."""
    if name == "memory":
        yield InMemorySaver()
    elif name == "sqlite":
        async with AsyncSqliteSaver.from_conn_string(
            str(tmp_path / "stock.db")
        ) as saver:
            yield saver
    else:
        with _schema_url() as url:
            async with AsyncPostgresSaver.from_conn_string(url) as saver:
                await saver.setup()
                yield saver


STOCK = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture
def opened(locations: LocationFactory) -> Iterator[OpenedStore]:
    location = locations()
    try:
        store = location.open(None)
        try:
            yield store
        finally:
            store.close()
    finally:
        location.remove()


def _config(thread: str = THREAD) -> Any:
    return {"configurable": {"thread_id": thread}}


def _summary(items: Any) -> list[Any]:
    """What must survive the copy: ids, namespaces, parents, metadata, values, writes."""
    return sorted(
        (
            item.config["configurable"]["checkpoint_ns"],
            item.config["configurable"]["checkpoint_id"],
            (item.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
            repr(sorted(item.metadata.items())),
            repr(sorted(item.checkpoint["channel_values"].items())),
            repr(sorted(item.checkpoint["channel_versions"].items())),
            repr(sorted((t, c, repr(v)) for t, c, v in item.pending_writes or [])),
        )
        for item in items
    )


def _stored(opened: OpenedStore) -> dict[str, bytes | None]:
    blobs = opened.transcripts
    return {ref: blobs.get(ref) for ref in sorted(blobs.list_refs(THREAD))}


def _string_versions(saver: Any) -> dict[str, Any]:
    latest = saver.get_tuple(_config())
    assert latest is not None
    versions: dict[str, Any] = latest.checkpoint["channel_versions"]
    return versions


@pytest.mark.clause("G17")
@pytest.mark.clause("G16")
@pytest.mark.parametrize("stock", STOCK)
def test_a_stock_thread_is_imported_whole_and_continued(
    stock: str, opened: OpenedStore, tmp_path: Path
) -> None:
    """Every checkpoint of every namespace arrives with metadata, parents and
    writes; a re-run changes no blob; our saver resumes the thread to its end."""
    calls = Calls()
    with stock_saver(stock, tmp_path) as source:
        graph = fan_graph(source, calls)
        for given in INPUTS[:2]:
            graph.invoke(given, _config(), durability="sync")
        fan_graph(source, Calls()).invoke(INPUTS[0], _config(OTHER))
        target = RulvarSaver(opened.journal, opened.transcripts, owner="mover")
        assert import_threads(source, target) == sorted([THREAD, OTHER])
        want = _summary(source.list(_config()))
        assert len({row[0] for row in want}) == 2  # the root and the subgraph
        assert _summary(target.list(_config())) == want
        assert _summary(target.list(_config(OTHER))) == _summary(
            source.list(_config(OTHER))
        )
        before = _stored(opened)
        assert import_threads(source, target, [THREAD]) == [THREAD]
        assert _stored(opened) == before
    ours = fan_graph(target, calls)
    with target.hold(THREAD) as config:
        final = ours.invoke(INPUTS[2], config)
    assert calls.counts == EXPECTED_RUNS
    assert final["confirmed"] == "ok"
    assert final["answer"] == "yes"
    versions = _string_versions(target)
    assert versions
    assert all(isinstance(v, str) for v in versions.values())


@pytest.mark.clause("G17")
@pytest.mark.clause("G16")
@pytest.mark.parametrize("stock", STOCK)
def test_an_async_stock_thread_is_imported_and_continued(
    stock: str, opened: OpenedStore, tmp_path: Path
) -> None:
    """The asyncio twin: AsyncSqliteSaver / AsyncPostgresSaver into AsyncRulvarSaver."""
    calls = Calls()

    async def scenario() -> Any:
        served = adapt_opened(opened)
        try:
            target = AsyncRulvarSaver(served.journal, served.transcripts, owner="m")
            async with astock_saver(stock, tmp_path) as source:
                graph = fan_graph(source, calls)
                for given in INPUTS[:2]:
                    await graph.ainvoke(given, _config(), durability="sync")
                assert await aimport_threads(source, target, [THREAD]) == [THREAD]
                want = _summary([i async for i in source.alist(_config())])
                got = _summary([i async for i in target.alist(_config())])
                assert got == want
            ours = fan_graph(target, calls)
            async with target.hold(THREAD) as config:
                final = await ours.ainvoke(INPUTS[2], config)
            latest = await target.aget_tuple(_config())
            assert latest is not None
            return final, latest.checkpoint["channel_versions"]
        finally:
            await served.aclose()

    final, versions = asyncio.run(scenario())
    assert calls.counts == EXPECTED_RUNS
    assert final["confirmed"] == "ok"
    assert versions
    assert all(isinstance(v, str) for v in versions.values())


@pytest.mark.clause("G17")
def test_the_import_is_refused_while_another_worker_holds_the_thread(
    opened: OpenedStore,
) -> None:
    """The copy writes under the target thread's lease: a held thread is not touched."""
    source = InMemorySaver()
    fan_graph(source, Calls()).invoke(INPUTS[0], _config())
    holder = RulvarSaver(opened.journal, opened.transcripts, owner="holder")
    mover = RulvarSaver(opened.journal, opened.transcripts, owner="mover")
    with holder.hold(THREAD), pytest.raises(LeaseHeldError):
        import_threads(source, mover, [THREAD])
    assert opened.transcripts.list_refs(THREAD) == []
    import_threads(source, mover, [THREAD])
    assert _summary(mover.list(_config())) == _summary(source.list(_config()))


@pytest.mark.clause("G16")
def test_next_version_keeps_the_threads_kind() -> None:
    """Integers stay integers (a new thread starts at 1); a stock saver's string
    gets the same format with its counter one up, greater than any of the step's."""
    assert next_version(None) == 1
    assert next_version(7) == 8
    stock = InMemorySaver()
    current = stock.get_next_version(stock.get_next_version(None, None), None)
    following = next_version(current)
    assert isinstance(following, str)
    assert following.split(".")[0] == f"{3:032}"
    assert following > current
    assert next_version(following) == f"{4:032}.{0:016}"
    assert InMemorySaver().get_next_version(following, None).startswith(f"{4:032}.")


@pytest.mark.clause("G16")
def test_a_version_string_without_a_counter_is_a_typed_error() -> None:
    """A string this saver cannot advance names itself; no bare ValueError."""
    with pytest.raises(InvalidArgumentError, match="channel version"):
        next_version("v-abc")
