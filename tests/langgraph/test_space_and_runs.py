"""A LangGraph thread is an ordinary run (G11), and dropped checkpoints give space back (G10).

Real SQLite files and PostgreSQL schemas: ``rulvar runs`` runs as a separate
process on the same location; space is measured in the database itself (pages
in use for SQLite, bytes of live blob rows for PostgreSQL).
"""

from __future__ import annotations

import sqlite3
from typing import Any, Final
from uuid import uuid4

import psycopg
import pytest

from rulvar_conformance.suites.langgraph_ownership import three_node_graph
from rulvar_langgraph import RulvarSaver
from rulvar_store import LeaseHeldError
from rulvar_store.backend import UrlOpener
from tests.cli.test_cli import _rulvar
from tests.langgraph._backends import SHARED

THREAD: Final = "thread-7"
pytestmark = pytest.mark.parametrize("locations", SHARED, indirect=True)


def _url(url_opener: UrlOpener) -> str:
    """The location as one URL the command line takes (options in the query)."""
    if not url_opener.options:
        return str(url_opener.url)
    query = "&".join(f"{key}={value}" for key, value in url_opener.options.items())
    return f"{url_opener.url}{'&' if '?' in url_opener.url else '?'}{query}"


def _stored_bytes(url_opener: UrlOpener) -> int:
    """What the database holds for blobs: SQLite pages in use, PostgreSQL live bytes."""
    if url_opener.url.startswith("sqlite"):
        path = url_opener.url.removeprefix("sqlite:///").split("?")[0]
        with sqlite3.connect(path) as conn:
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            free = conn.execute("PRAGMA freelist_count").fetchone()[0]
            size = conn.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * size)
    schema = url_opener.options["schema"]
    with psycopg.connect(url_opener.url) as conn:
        row = conn.execute(
            f'SELECT coalesce(sum(octet_length(data)), 0) FROM "{schema}".rulvar_blobs'
        ).fetchone()
    assert row is not None
    return int(row[0])


def _invoke(saver: RulvarSaver, times: int) -> None:
    graph = three_node_graph(saver, "worker")
    for _ in range(times):
        # The savers merge config metadata (LangGraph Platform's run_id) into
        # every checkpoint's metadata; delete_for_runs finds checkpoints by it.
        with saver.hold(THREAD, {"metadata": {"run_id": str(uuid4())}}) as config:
            graph.invoke({"trail": ["x" * 20_000]}, config, durability="sync")


@pytest.mark.clause("G11")
def test_rulvar_runs_list_show_audit_delete_work_on_a_thread(
    url_opener: UrlOpener,
) -> None:
    """list and show name the thread, audit finds it consistent, delete removes it."""
    url = _url(url_opener)
    with RulvarSaver.from_url(
        url_opener.url, owner="worker", **url_opener.options
    ) as saver:
        _invoke(saver, 1)
        with saver.hold(THREAD) as stale_config:
            stale: Any = stale_config
        listed = _rulvar("runs", "list", url)
        assert listed.returncode == 0, listed.stderr
        assert THREAD in listed.stdout
        assert "langgraph" in listed.stdout
        shown = _rulvar("runs", "show", url, THREAD)
        assert shown.returncode == 0, shown.stderr
        assert f"{THREAD}/c/n/" in shown.stdout
        audited = _rulvar("runs", "audit", url)
        assert audited.returncode == 0, audited.stdout + audited.stderr
        deleted = _rulvar("runs", "delete", url, THREAD)
        assert deleted.returncode == 0, deleted.stdout + deleted.stderr
        assert saver.get_tuple({"configurable": {"thread_id": THREAD}}) is None
        assert list(saver.list({"configurable": {"thread_id": THREAD}})) == []
        # The epoch survived the CLI's delete: a lease from before it stays fenced.
        with pytest.raises(LeaseHeldError):
            saver.put_writes(
                {"configurable": {**stale["configurable"], "checkpoint_id": "1f0-1"}},
                [("trail", ["late"])],
                "task-late",
            )
        assert saver.transcripts.list_refs(THREAD) == []


@pytest.mark.clause("G10")
def test_prune_and_delete_for_runs_give_the_bytes_back(url_opener: UrlOpener) -> None:
    """Stored bytes fall after delete_for_runs, again after prune, and after delete_thread."""
    with RulvarSaver.from_url(
        url_opener.url, owner="worker", **url_opener.options
    ) as saver:
        _invoke(saver, 3)
        runs = {
            item.metadata.get("run_id")
            for item in saver.list({"configurable": {"thread_id": THREAD}})
        }
        assert len(runs) == 3
        full = _stored_bytes(url_opener)
        saver.delete_for_runs([sorted(str(run) for run in runs)[0]])
        after_runs = _stored_bytes(url_opener)
        saver.prune([THREAD])
        after_prune = _stored_bytes(url_opener)
        assert len(list(saver.list({"configurable": {"thread_id": THREAD}}))) == 1
        saver.delete_thread(THREAD)
        after_delete = _stored_bytes(url_opener)
    assert full > after_runs > after_prune > after_delete
