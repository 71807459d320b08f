"""LangGraph threads in ``rulvar runs``: by thread id, with a status that tells them apart.

Real graphs on a real SQLite file and a real PostgreSQL schema; the crashed
worker is a real process SIGKILLed inside a node. The CLI runs in-process
through ``rulvar_cli.main`` (exit codes as shipped).
"""

from __future__ import annotations

import json
import operator
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Final, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from rulvar_conformance import ManualClock
from rulvar_langgraph import RulvarSaver
from rulvar_store import open_store
from rulvar_store.backend import UrlOpener
from rulvar_store.ops import checkpoint_time, iso_ms, run_for_thread
from tests.langgraph._backends import SHARED
from tests.operator._places import CliResult, invoke

ROOT: Final = Path(__file__).resolve().parents[2]
WORKER: Final = Path(__file__).with_name("sigkill_worker.py")
BOUND_S: Final = 60.0


class State(TypedDict):
    mode: str
    trail: Annotated[list[str], operator.add]


def four_node_graph(saver: RulvarSaver) -> Any:
    """a -> b -> c -> d; ``b`` interrupts or fails as the state's ``mode`` says."""

    def step(name: str) -> Any:
        def node(state: State) -> dict[str, Any]:
            time.sleep(0.002)  # checkpoints of successive steps a millisecond apart
            if name == "b" and state["mode"] == "interrupt":
                return {"trail": [f"b:{interrupt('approve?')}"]}
            if name == "b" and state["mode"] == "fail":
                raise RuntimeError("node b failed")
            return {"trail": [name]}

        return node

    graph = StateGraph(State)
    for name in "abcd":
        graph.add_node(name, step(name))
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("b", "c")
    graph.add_edge("c", "d")
    graph.add_edge("d", END)
    return graph.compile(checkpointer=saver)


def cli_url(opener: UrlOpener) -> str:
    """The location as one URL the command line takes (a PostgreSQL schema in it)."""
    schema = opener.options.get("schema")
    if schema is None:
        return opener.url
    return f"{opener.url}{'&' if '?' in opener.url else '?'}schema={schema}"


def listed(url: str) -> dict[str, dict[str, Any]]:
    """``runs list --json`` rows by thread id (runs that are not threads left out)."""
    result = invoke("runs", "list", url, "--json")
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)["runs"]
    return {row["threadId"]: row for row in rows if row["threadId"] is not None}


def run_held(saver: RulvarSaver, thread: str, mode: str) -> None:
    graph = four_node_graph(saver)
    with saver.hold(thread) as config:
        graph.invoke({"mode": mode, "trail": []}, config, durability="sync")


def _kill_inside_a_node(opener: UrlOpener, thread: str, tmp_path: Path) -> None:
    """A real worker process holds ``thread``, reaches its node n2, and is SIGKILLed."""
    reached = tmp_path / "reached"
    spec = {
        "url": opener.url,
        "options": dict(opener.options),
        "thread": thread,
        "ttl_ms": 1_000,
        "reached": str(reached),
    }
    log = tmp_path / "worker.log"
    with log.open("wb") as sink:
        child = subprocess.Popen(
            [sys.executable, str(WORKER), json.dumps(spec)],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stderr=sink,
        )
    try:
        deadline = time.monotonic() + BOUND_S
        while not reached.exists():
            assert child.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the worker never reached n2"
            time.sleep(0.02)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL


def _wait_until_expired(saver: RulvarSaver, thread: str) -> None:
    """Poll the lease row (bounded) until the dead worker's ttl ran out."""
    deadline = time.monotonic() + BOUND_S
    while True:
        state = saver.journal.peek_lease(run_for_thread(thread))  # type: ignore[attr-defined]  # SQLite and PostgreSQL peek
        assert state is not None, "the killed worker's lease row is gone"
        if not state.live:
            return
        assert time.monotonic() < deadline, "the killed worker's lease never expired"
        time.sleep(0.1)


@pytest.mark.parametrize("locations", SHARED, indirect=True)
@pytest.mark.clause("A10")
@pytest.mark.clause("A11")
def test_runs_list_tells_every_thread_status_apart(
    url_opener: UrlOpener, tmp_path: Path
) -> None:
    """A10, A11: finished, interrupted, failed, running, abandoned and incomplete threads.

    Each listed by its own thread id, with the status its lease row, its last
    hold's outcome and its newest checkpoint tell.
    """
    url = cli_url(url_opener)
    _kill_inside_a_node(url_opener, "crashed worker/1", tmp_path)
    with RulvarSaver.from_url(
        url_opener.url, owner="worker", **url_opener.options
    ) as saver:
        run_held(saver, "user/42 ticket", "finish")
        run_held(saver, "needs approval", "interrupt")
        with pytest.raises(RuntimeError, match="node b failed"):
            run_held(saver, "breaks", "fail")
        four_node_graph(saver).invoke(
            {"mode": "finish", "trail": []},
            {"configurable": {"thread_id": "unheld"}},
            durability="sync",
        )
        _wait_until_expired(saver, "crashed worker/1")
        graph = four_node_graph(saver)
        with saver.hold("busy") as config:
            graph.invoke({"mode": "interrupt", "trail": []}, config)
            rows = listed(url)
            text = invoke("runs", "list", url)
    statuses = {thread: row["status"] for thread, row in rows.items()}
    assert statuses == {
        "user/42 ticket": "finished",
        "needs approval": "interrupted",
        "breaks": "failed",
        "unheld": "incomplete",
        "crashed worker/1": "abandoned",
        "busy": "running",
    }
    assert rows["busy"]["thread"]["holder"] == "worker"
    assert rows["crashed worker/1"]["thread"]["holder"] == "worker-killed"
    assert rows["user/42 ticket"]["runId"] == run_for_thread("user/42 ticket")
    assert rows["user/42 ticket"]["metaStatus"] == "ok"
    assert rows["breaks"]["metaStatus"] == "error"
    lines = {line.split("  ")[0].strip(): line for line in text.stdout.splitlines()}
    assert "user/42 ticket" in lines
    assert " finished " in lines["user/42 ticket"]
    assert "lgx." not in text.stdout
    narrowed = invoke("runs", "list", url, "--status", "abandoned", "--json")
    assert [row["threadId"] for row in json.loads(narrowed.stdout)["runs"]] == [
        "crashed worker/1"
    ]
    # --status also takes the run status a thread status stands for; "busy"'s
    # hold has ended meanwhile, interrupted.
    as_run_status = invoke("runs", "list", url, "--status", "suspended", "--json")
    assert [row["threadId"] for row in json.loads(as_run_status.stdout)["runs"]] == [
        "busy",
        "needs approval",
    ]


@pytest.mark.parametrize("locations", SHARED, indirect=True)
@pytest.mark.clause("A11")
def test_a_resumed_interrupt_is_finished_and_a_later_unheld_write_incomplete(
    url_opener: UrlOpener,
) -> None:
    """A11: the status follows the thread: interrupted, resumed to finished, then incomplete."""
    url = cli_url(url_opener)
    with RulvarSaver.from_url(
        url_opener.url, owner="worker", **url_opener.options
    ) as saver:
        run_held(saver, "approval", "interrupt")
        assert listed(url)["approval"]["status"] == "interrupted"
        graph = four_node_graph(saver)
        with saver.hold("approval") as config:
            out = graph.invoke(Command(resume="yes"), config, durability="sync")
        assert out["trail"] == ["a", "b:yes", "c", "d"]
        assert listed(url)["approval"]["status"] == "finished"
        graph.update_state(
            {"configurable": {"thread_id": "approval"}}, {"trail": ["x"]}
        )
        row = listed(url)["approval"]
    assert row["status"] == "incomplete"
    assert "outside a hold" in row["thread"]["reason"]


@pytest.mark.parametrize("locations", SHARED, indirect=True)
@pytest.mark.clause("A12")
def test_updated_at_moves_with_every_checkpoint(url_opener: UrlOpener) -> None:
    """A12: inside one hold, each step's checkpoint moves updatedAt; the meta is not rewritten."""
    url = cli_url(url_opener)
    seen: list[str] = []
    metas: list[dict[str, Any]] = []
    with RulvarSaver.from_url(
        url_opener.url, owner="worker", **url_opener.options
    ) as saver:
        graph = four_node_graph(saver)
        run_id = run_for_thread("stepping thread")
        with saver.hold("stepping thread") as config:
            for _ in graph.stream(
                {"mode": "finish", "trail": []}, config, durability="sync"
            ):
                seen.append(listed(url)["stepping thread"]["updatedAt"])
                meta = saver.journal.get_meta(run_id)  # type: ignore[attr-defined]  # check_stores saw get_meta
                newest = saver.get_tuple(config)
                assert newest is not None
                stamp = checkpoint_time(newest.config["configurable"]["checkpoint_id"])
                assert stamp is not None
                assert seen[-1] == iso_ms(stamp)
                metas.append(meta)
        assert len(seen) == 4
        assert seen == sorted(seen), seen
        assert len(set(seen)) == 4, seen
        # One meta write while the hold ran (the thread's first put), none per step.
        assert all(meta == metas[0] for meta in metas), metas
        assert "threadStatus" not in metas[0]


@pytest.mark.parametrize("locations", SHARED, indirect=True)
@pytest.mark.clause("A10")
@pytest.mark.clause("A13")
def test_show_audit_prune_and_delete_take_thread_ids(url_opener: UrlOpener) -> None:
    """A10, A13: the commands name a thread by its id; a live holder's thread is skipped."""
    url = cli_url(url_opener)
    with RulvarSaver.from_url(
        url_opener.url, owner="worker", **url_opener.options
    ) as saver:
        run_held(saver, "user/42 ticket", "finish")
        shown = invoke("runs", "show", url, "user/42 ticket")
        assert shown.exit_code == 0, shown.stderr
        assert "thread   user/42 ticket: finished" in shown.stdout
        as_json = invoke("runs", "show", url, "--thread", "user/42 ticket", "--json")
        report = json.loads(as_json.stdout)
        assert report["threadId"] == "user/42 ticket"
        assert report["thread"]["status"] == "finished"
        assert report["runId"] == run_for_thread("user/42 ticket")
        audited = invoke("runs", "audit", url, "user/42 ticket")
        assert audited.exit_code == 0, audited.stderr
        pruned = invoke("runs", "prune", url, "user/42 ticket")
        assert pruned.exit_code == 0, pruned.stderr
        assert pruned.stdout.strip() == "user/42 ticket: pruned 0 checkpoints"
        with saver.hold("user/42 ticket"):
            skipped = invoke("runs", "delete", url, "user/42 ticket")
        assert skipped.exit_code == 1
        assert "user/42 ticket: skipped" in skipped.stdout
        deleted = invoke("runs", "delete", url, "--thread", "user/42 ticket")
        assert deleted.exit_code == 0, deleted.stderr
        assert deleted.stdout.strip() == "user/42 ticket: deleted"
        assert (
            saver.get_tuple({"configurable": {"thread_id": "user/42 ticket"}}) is None
        )
        assert "user/42 ticket" not in listed(url)
        missing = invoke("runs", "show", url, "--thread", "user/42 ticket")
        assert missing.exit_code == 1
        assert "no LangGraph thread 'user/42 ticket'" in missing.stderr


@pytest.mark.parametrize("locations", SHARED, indirect=True)
@pytest.mark.clause("A13")
def test_a_name_that_is_a_run_and_another_thread_is_refused_until_told(
    url_opener: UrlOpener,
) -> None:
    """A13: 'lgx.612062' is thread 'a b''s run id and thread 'lgx.612062' itself."""
    url = cli_url(url_opener)
    with RulvarSaver.from_url(
        url_opener.url, owner="worker", **url_opener.options
    ) as saver:
        run_held(saver, "a b", "finish")
        run_held(saver, "lgx.612062", "interrupt")
    assert run_for_thread("a b") == "lgx.612062"
    both = invoke("runs", "show", url, "lgx.612062")
    assert both.exit_code == 2
    assert "--run or --thread" in both.stderr
    as_thread = json.loads(
        invoke("runs", "show", url, "--thread", "lgx.612062", "--json").stdout
    )
    assert (as_thread["threadId"], as_thread["thread"]["status"]) == (
        "lgx.612062",
        "interrupted",
    )
    as_run = json.loads(
        invoke("runs", "show", url, "--run", "lgx.612062", "--json").stdout
    )
    assert (as_run["threadId"], as_run["thread"]["status"]) == ("a b", "finished")
    refused = invoke("runs", "delete", url, "lgx.612062")
    assert refused.exit_code == 1
    assert "--run or --thread" in refused.stderr
    assert set(listed(url)) == {"a b", "lgx.612062"}


@pytest.mark.parametrize("locations", SHARED, indirect=True)
@pytest.mark.clause("G23")
def test_a_superseded_holds_outcome_is_refused(url_opener: UrlOpener) -> None:
    """G23: A's lease expires, B takes the thread over and finishes; A's end changes nothing."""
    clock = ManualClock()
    options = {**url_opener.options, "ttl_ms": 60_000, "now": clock}
    with (
        open_store(url_opener.url, **options) as store_a,
        open_store(url_opener.url, **options) as store_b,
    ):
        a = RulvarSaver.over(store_a, owner="worker-a")
        b = RulvarSaver.over(store_b, owner="worker-b")
        with a.hold("contested") as config_a:
            # A's hold writes the thread up to its interrupt: its outcome would
            # be "interrupted".
            four_node_graph(a).invoke({"mode": "interrupt", "trail": []}, config_a)
            clock.advance(61_000)
            with b.hold("contested") as config_b:
                four_node_graph(b).invoke(Command(resume="ok"), config_b)
        meta = store_b.journal.get_meta(run_for_thread("contested"))  # type: ignore[attr-defined]  # SQLite and PostgreSQL have get_meta
        newest = b.get_tuple({"configurable": {"thread_id": "contested"}})
    assert newest is not None
    assert meta["threadStatus"] == "finished"
    assert meta["checkpointId"] == newest.config["configurable"]["checkpoint_id"]
    assert "error" not in meta


@pytest.mark.parametrize("locations", SHARED, indirect=True)
@pytest.mark.clause("A14")
def test_runs_commands_work_on_threads_without_langgraph(
    url_opener: UrlOpener, tmp_path: Path
) -> None:
    """A14: a process where langgraph and ormsgpack cannot be imported lists, shows, deletes."""
    url = cli_url(url_opener)
    with RulvarSaver.from_url(
        url_opener.url, owner="worker", **url_opener.options
    ) as saver:
        run_held(saver, "user/42 ticket", "interrupt")
    script = tmp_path / "no_langgraph.py"
    script.write_text(
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('langgraph', 'langchain_core', 'ormsgpack'):\n"
        "            raise ImportError(f'blocked: {name}')\n"
        "sys.meta_path.insert(0, Block())\n"
        "from rulvar_cli import main\n"
        "main(sys.argv[1:])\n"
    )

    def run(*args: str) -> CliResult:
        done = subprocess.run(
            [sys.executable, str(script), *args],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=BOUND_S,
            check=False,
        )
        return CliResult(done.returncode, done.stdout, done.stderr)

    rows = json.loads(run("runs", "list", url, "--json").stdout)["runs"]
    assert [(r["threadId"], r["status"]) for r in rows] == [
        ("user/42 ticket", "interrupted")
    ]
    shown = run("runs", "show", url, "user/42 ticket")
    assert shown.exit_code == 0, shown.stderr
    assert "thread   user/42 ticket: interrupted" in shown.stdout
    deleted = run("runs", "delete", url, "user/42 ticket")
    assert deleted.exit_code == 0, deleted.stderr
    assert json.loads(run("runs", "list", url, "--json").stdout)["runs"] == []


@pytest.mark.clause("G24")
def test_a_held_invocation_on_sqlite_commits_once_per_write_plus_acquire_and_end(
    tmp_path: Path,
) -> None:
    """G24: the thread's meta and the hold's outcome ride commits the invocation pays anyway."""
    with RulvarSaver.from_url(f"sqlite:///{tmp_path / 'c.db'}", owner="w") as saver:
        writes = {"put": 0, "put_writes": 0}
        door = saver.journal._door  # type: ignore[attr-defined]  # SQLite's commit counter
        put, put_writes = saver.put, saver.put_writes

        def counted_put(*args: Any, **kwargs: Any) -> Any:
            writes["put"] += 1
            return put(*args, **kwargs)

        def counted_put_writes(*args: Any, **kwargs: Any) -> Any:
            writes["put_writes"] += 1
            return put_writes(*args, **kwargs)

        saver.put = counted_put  # type: ignore[method-assign]  # counts, then the real put
        saver.put_writes = counted_put_writes  # type: ignore[method-assign]  # likewise
        before = door.batches
        run_held(saver, "counted", "finish")
        commits = door.batches - before
        meta = saver.journal.get_meta(run_for_thread("counted"))  # type: ignore[attr-defined]  # SQLite get_meta
        assert saver.journal.peek_lease(run_for_thread("counted")) is None  # type: ignore[attr-defined]  # released
    assert writes["put"] >= 5
    assert meta["threadStatus"] == "finished"
    # acquire + one commit per write (group commit may only merge) + the end.
    assert commits <= 1 + writes["put"] + writes["put_writes"] + 1, (commits, writes)
