"""Observer guarantees of ``rulvar runs`` over SQLite and PostgreSQL.

Every observer is a potential writer unless proven otherwise. These tests prove,
per backend: the read-only commands leave every stored byte as it was (no lease,
no epoch) and work where writing is impossible; two repair passes never both
repair one run and the loser does not wait; a store that stops answering gives a
message and exit 3, never a hang; a corrupt run is that run's diagnostic.
"""

from __future__ import annotations

import os
import pty
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rulvar_cli._operator import Watchdog, open_for_operator
from rulvar_cli._repair import repair_audit
from rulvar_store import ConfigError
from rulvar_store.backend import set_failpoint_hook
from rulvar_store.ops import iter_run_audits
from tests.operator._journals import entry, running, settle, suspension, write_run
from tests.operator._places import CliResult, Place, with_query

Rulvar = Callable[..., CliResult]
WORKTREE = Path(__file__).resolve().parents[2]


def _seed(place: Place, runs: int = 6) -> None:
    """Divergent and consistent runs, a live lease, an expired lease, blobs."""
    opened = place.open()
    store = opened.journal
    for index in range(runs):
        kind = index % 3
        run_id = f"run-{index:02d}"
        if kind == 0:
            write_run(
                store, run_id, [entry(0, "step", "ok"), settle(1, "ok")], "running"
            )
        elif kind == 1:
            write_run(store, run_id, [settle(0, "ok"), running(1)], "ok")
        else:
            write_run(store, run_id, [suspension(0)], "suspended", extra={"k": [1]})
        opened.transcripts.put(f"{run_id}/ckpt/0", bytes([index]) * 64)
    store.acquire("run-00", "worker-live")  # type: ignore[attr-defined]
    lease = store.acquire("run-01", "worker-done")  # type: ignore[attr-defined]
    store.release(lease)  # type: ignore[attr-defined]


def _rulvar_process(
    *args: str, timeout: float = 120, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(WORKTREE)}
    return subprocess.run(
        [sys.executable, "-m", "rulvar_cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
        **kwargs,
    )


# -- read-only ----------------------------------------------------------------


@pytest.mark.clause("A2")
@pytest.mark.parametrize(
    "writer_open", [True, False], ids=["writer-open", "writer-closed"]
)
def test_observers_leave_every_stored_byte_as_it_was(
    byte_place: Place, rulvar: Rulvar, writer_open: bool
) -> None:
    """A2: runs list, show and audit (no --repair) change no byte: no lease, no epoch, no WAL frame, no row."""
    _seed(byte_place)
    if not writer_open:
        byte_place.close_all()
    assert byte_place.fingerprint is not None
    assert byte_place.url is not None
    before = byte_place.fingerprint()
    for args in (
        ("runs", "list", byte_place.url),
        ("runs", "list", byte_place.url, "--json", "--status", "ok"),
        ("runs", "show", byte_place.url, "run-00"),
        ("runs", "show", byte_place.url, "run-01", "--json"),
        ("runs", "show", byte_place.url, "no-such-run"),
        ("runs", "audit", byte_place.url),
        ("runs", "audit", byte_place.url, "--json"),
    ):
        result = rulvar(*args)
        # 0/1 also proves no write was even attempted: the observers' connections
        # are read-only (SQLITE_OPEN_READONLY, PostgreSQL read-only sessions), so a
        # write would have failed the command with exit 3.
        assert result.exit_code in (0, 1), (args, result.stderr)
        assert "Traceback" not in result.stderr
    assert byte_place.fingerprint() == before


@pytest.mark.clause("A2")
def test_the_observer_sqlite_connection_cannot_write(tmp_path: Path) -> None:
    """A2: observers open SQLite with SQLITE_OPEN_READONLY, so even a write by mistake is refused by SQLite."""
    from rulvar_store import open_store

    path = tmp_path / "runs.db"
    with open_store(f"sqlite:///{path}") as opened:
        write_run(opened.journal, "run-a", [running(0)], "running")
    watchdog = Watchdog(5)
    try:
        with open_for_operator(
            f"sqlite:///{path}", write=False, timeout_s=5, watchdog=watchdog
        ) as opened:
            with pytest.raises(ConfigError, match="readonly database") as caught:
                opened.journal.put_meta(
                    {"runId": "run-a", "status": "ok", "updatedAt": "x"}
                )
            assert type(caught.value.__cause__).__name__ == "ReadOnlyError"
            assert not caught.value.retryable
            with pytest.raises(ConfigError, match="readonly database"):
                opened.journal.acquire("run-a", "observer")  # type: ignore[attr-defined]
            assert [
                a.run_id
                for a in iter_run_audits(opened.journal, include_consistent=True)
            ] == ["run-a"]
    finally:
        watchdog.stop()


@pytest.mark.clause("A2")
def test_observers_work_on_a_read_only_sqlite_file(tmp_path: Path) -> None:
    """A2: with the file 0444 and its directory 0555, list, show and audit succeed (real processes)."""
    from rulvar_store import open_store

    directory = tmp_path / "ro"
    directory.mkdir()
    path = directory / "runs.db"
    with open_store(f"sqlite:///{path}") as opened:
        write_run(
            opened.journal,
            "run-a",
            [entry(0, "step", "ok"), settle(1, "ok")],
            "running",
        )
    path.chmod(0o444)
    directory.chmod(0o555)
    try:
        url = f"sqlite:///{path}"
        assert _rulvar_process("runs", "list", url).returncode == 0
        assert _rulvar_process("runs", "show", url, "run-a").returncode == 0
        audit = _rulvar_process("runs", "audit", url)
        assert audit.returncode == 1
        assert audit.stdout.startswith("run-a meta-behind: ")
    finally:
        directory.chmod(0o755)


@pytest.mark.clause("A2")
def test_observers_work_with_a_select_only_postgres_role(rulvar: Rulvar) -> None:
    """A2: a role with only USAGE and SELECT on the schema can list, show and audit; it cannot write."""
    import psycopg

    from tests.operator._places import drop_schema, postgres_url

    admin = postgres_url()
    schema = f"rulvar_op_{secrets.token_hex(5)}"
    role = f"rulvar_ro_{secrets.token_hex(4)}"
    from rulvar_store import open_store

    try:
        with open_store(with_query(admin, schema=schema)) as opened:
            write_run(
                opened.journal,
                "run-a",
                [entry(0, "step", "ok"), settle(1, "ok")],
                "running",
            )
            opened.journal.acquire("run-a", "worker")  # type: ignore[attr-defined]
            # Nobody holds run-b: the repair tries to write it, and must be refused.
            write_run(
                opened.journal,
                "run-b",
                [entry(0, "step", "ok"), settle(1, "ok")],
                "running",
            )
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE ROLE "{role}" LOGIN')
            conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
            conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
        parts = admin.split("://", 1)
        host = parts[1].split("@", 1)[-1]
        url = with_query(f"{parts[0]}://{role}@{host}", schema=schema)
        listed = rulvar("runs", "list", url)
        assert listed.exit_code == 0, listed.stderr
        shown = rulvar("runs", "show", url, "run-a")
        assert shown.exit_code == 0, shown.stderr
        assert "lease    worker epoch 1" in shown.stdout
        audited = rulvar("runs", "audit", url)
        assert audited.exit_code == 1
        assert audited.stdout.startswith("run-a meta-behind: ")
        repair = rulvar("runs", "audit", url, "--repair")
        assert repair.exit_code in (2, 3)  # the role may not even boot a writer
        assert "permission denied" in repair.stderr
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            drop_schema(admin, schema)
            conn.execute(f'DROP OWNED BY "{role}"')
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')


# -- one writer at a time ---------------------------------------------------------


@pytest.mark.clause("A6")
def test_a_repair_in_progress_makes_the_other_pass_skip_without_waiting(
    byte_place: Place,
) -> None:
    """A6: while pass A holds a run's lease mid-repair, pass B skips that run at once; only A repairs."""
    store_a = byte_place.open().journal
    store_b = byte_place.open().journal
    write_run(store_a, "run-a", [entry(0, "step", "ok"), settle(1, "ok")], "running")
    (audit,) = list(iter_run_audits(store_a))
    a_holds_lease = threading.Event()
    let_a_go = threading.Event()
    a_thread: list[threading.Thread] = []

    def hook(operation: str, point: str) -> None:
        if (
            operation == "acquire"
            and point == "after-commit"
            and threading.current_thread() in a_thread
        ):
            a_holds_lease.set()
            let_a_go.wait(30)

    results: dict[str, Any] = {}
    a_thread.append(
        threading.Thread(
            target=lambda: results.update(
                a=repair_audit(store_a, audit, owner="runs-audit-A")
            )
        )
    )
    previous = set_failpoint_hook(hook)
    try:
        a_thread[0].start()
        assert a_holds_lease.wait(30)
        started = time.monotonic()
        results["b"] = repair_audit(store_b, audit, owner="runs-audit-B")
        b_seconds = time.monotonic() - started
        let_a_go.set()
        a_thread[0].join(30)
    finally:
        let_a_go.set()
        set_failpoint_hook(previous)
    assert results["b"].action == "skipped"
    assert results["b"].suffix == " (leased by a live owner, skipped)"
    assert results["a"].action == "repaired"
    # Pass A stays paused for up to 30 s; a B that waited for A's lease would take that long.
    assert b_seconds < 20, "pass B waited for pass A's lease instead of skipping"
    assert store_b.list_runs()[0]["status"] == "ok"


@pytest.mark.clause("A6")
def test_two_repair_passes_started_together_never_both_repair_a_run(
    byte_place: Place,
) -> None:
    """A6: two real `runs audit --repair` processes over the same 40 runs: each run repaired exactly once."""
    assert byte_place.url is not None
    store = byte_place.open().journal
    runs = [f"run-{index:02d}" for index in range(40)]
    for run_id in runs:
        write_run(store, run_id, [entry(0, "step", "ok"), settle(1, "ok")], "running")
    env = {**os.environ, "PYTHONPATH": str(WORKTREE)}
    command = [
        sys.executable,
        "-m",
        "rulvar_cli",
        "runs",
        "audit",
        byte_place.url,
        "--repair",
        "--json",
    ]
    processes = [
        subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=120) for process in processes]
    repaired: list[set[str]] = []
    import json

    for (stdout, stderr), process in zip(outputs, processes, strict=True):
        assert process.returncode in (0, 1), stderr
        rows = json.loads(stdout)["runs"] if stdout.strip() else []
        assert {row["action"] for row in rows} <= {
            "repaired",
            "skipped",
            "already-consistent",
        }
        repaired.append({row["runId"] for row in rows if row["action"] == "repaired"})
    assert repaired[0].isdisjoint(repaired[1])
    assert repaired[0] | repaired[1] == set(runs)
    assert all(meta["status"] == "ok" for meta in store.list_runs())


# -- bounded ----------------------------------------------------------------------


@pytest.mark.clause("A6")
def test_a_sqlite_writer_paused_in_its_transaction_bounds_repair_not_reads(
    tmp_path: Path,
) -> None:
    """A6: with a writer paused inside BEGIN IMMEDIATE, reads still answer and --repair exits 3 within its bound."""
    import apsw

    from rulvar_store import open_store

    path = tmp_path / "runs.db"
    url = f"sqlite:///{path}"
    with open_store(url) as opened:
        write_run(
            opened.journal,
            "run-a",
            [entry(0, "step", "ok"), settle(1, "ok")],
            "running",
        )
    paused = apsw.Connection(str(path))
    paused.execute("BEGIN IMMEDIATE")
    try:
        assert _rulvar_process("runs", "list", url, "--timeout", "1").returncode == 0
        started = time.monotonic()
        result = _rulvar_process(
            "runs", "audit", url, "--repair", "--timeout", "1", timeout=60
        )
        elapsed = time.monotonic() - started
    finally:
        paused.execute("ROLLBACK")
        paused.close()
    assert result.returncode == 3, result.stderr
    assert "store_busy" in result.stderr
    assert "--timeout 1 s" in result.stderr
    assert elapsed < 30


@pytest.mark.clause("A6")
def test_a_postgres_lock_held_elsewhere_gives_exit_3_not_a_hang(rulvar: Rulvar) -> None:
    """A6: a table lock held by another session bounds runs list; a run's lock held bounds --repair."""
    import psycopg

    from rulvar_store import open_store
    from tests.operator._places import drop_schema, postgres_url

    admin = postgres_url()
    schema = f"rulvar_op_{secrets.token_hex(5)}"
    url = with_query(admin, schema=schema)
    try:
        with open_store(url) as opened:
            write_run(
                opened.journal,
                "run-a",
                [entry(0, "step", "ok"), settle(1, "ok")],
                "running",
            )
        with psycopg.connect(admin) as holder:
            holder.execute(
                f'LOCK TABLE "{schema}".rulvar_meta IN ACCESS EXCLUSIVE MODE'
            )
            started = time.monotonic()
            listed = rulvar("runs", "list", url, "--timeout", "1")
            assert time.monotonic() - started < 30
            holder.rollback()
        assert listed.exit_code == 3, listed.stderr
        assert "store_busy" in listed.stderr
        with psycopg.connect(admin) as holder:
            holder.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 8214))",
                (f"{schema}:run-a",),
            )
            repaired = rulvar("runs", "audit", url, "--repair", "--timeout", "1")
            holder.rollback()
        assert repaired.exit_code == 3, repaired.stderr
        assert "store_busy" in repaired.stderr
    finally:
        drop_schema(admin, schema)


def test_the_watchdog_ends_a_call_stuck_below_every_backend_bound() -> None:
    """A call that outlives --timeout plus slack ends the process with a message and exit 3."""
    code = (
        "import time\n"
        "from rulvar_cli._operator import Watchdog\n"
        "dog = Watchdog(0.2)\n"
        "with dog.bound('reading run x'):\n"
        "    time.sleep(60)\n"
    )
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(WORKTREE)},
    )
    assert result.returncode == 3
    assert "did not answer while reading run x within 0.2 s" in result.stderr
    assert time.monotonic() - started < 30


# -- non-fatal --------------------------------------------------------------------


@pytest.mark.clause("A5")
def test_a_corrupt_run_is_reported_and_the_others_still_listed_and_audited(
    url_place: Place, rulvar: Rulvar
) -> None:
    """A5: one corrupt run shows as unreadable in list, audit and show; the rest are processed; exit 1."""
    assert url_place.url is not None
    assert url_place.corrupt_journal is not None
    assert url_place.corrupt_meta_text is not None
    store = url_place.open().journal
    write_run(store, "run-a", [running(0), running(1)], "ok")
    write_run(store, "run-b", [entry(0, "step", "ok"), settle(1, "ok")], "running")
    write_run(store, "run-c", [running(0)], "running")
    write_run(store, "run-d", [running(0)], "running")
    url_place.close_all()
    url_place.corrupt_journal("run-a")
    url_place.corrupt_meta_text("run-c", "[1, 2]")
    audit = rulvar("runs", "audit", url_place.url)
    assert audit.exit_code == 1
    verdicts = [line.split(":")[0] for line in audit.stdout.splitlines()]
    assert verdicts == ["run-a unreadable", "run-b meta-behind", "run-c unreadable"]
    listed = rulvar("runs", "list", url_place.url)
    assert listed.exit_code == 1
    assert [line.split()[0] for line in listed.stdout.splitlines()[1:]] == [
        "run-a",
        "run-b",
        "run-c",
        "run-d",
    ]
    assert "run-c" in listed.stdout.splitlines()[3]
    assert "unreadable" in listed.stdout.splitlines()[3]
    shown = rulvar("runs", "show", url_place.url, "run-a")
    assert shown.exit_code == 1
    assert "audit    unreadable:" in shown.stdout


# -- progress ---------------------------------------------------------------------


def test_progress_shows_on_a_terminal_and_stays_quiet_when_piped(
    tmp_path: Path,
) -> None:
    """Long passes count on a terminal's stderr; piped, stderr carries only the summary."""
    from rulvar_store import open_store

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with open_store(url) as opened:
        for index in range(30):
            write_run(opened.journal, f"run-{index:02d}", [running(0)], "running")
    piped = _rulvar_process("runs", "audit", url)
    assert piped.stderr == "every run is consistent with its journal\n"
    leader, follower = pty.openpty()
    try:
        process = subprocess.run(
            [sys.executable, "-m", "rulvar_cli", "runs", "audit", url],
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=120,
            check=False,
            env={**os.environ, "PYTHONPATH": str(WORKTREE)},
        )
        os.close(follower)
        follower = -1
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if follower != -1:
            os.close(follower)
        os.close(leader)
    assert process.returncode == 0
    assert b"audited: 1" in shown
    assert b"every run is consistent with its journal" in shown


@pytest.mark.clause("A2")
def test_observers_leave_a_file_store_with_a_torn_tail_untouched(
    tmp_path: Path, rulvar: Rulvar
) -> None:
    """A2: over file://, observers never repair a torn tail: every file keeps its bytes."""
    import hashlib

    from rulvar_store import open_store

    root = tmp_path / "files"
    url = f"file://{root}"
    opened = open_store(url)
    write_run(opened.journal, "run-a", [running(0)], "ok")
    opened.transcripts.put("run-a/ckpt/0", b"abc")
    with (root / "run-a" / "journal.jsonl").open("ab") as journal:
        journal.write(b'{"seq": 1, "ki')  # a crash mid-append

    def tree() -> str:
        digest = hashlib.sha256()
        for path in sorted(root.rglob("*")):
            digest.update(
                str(path).encode() + (path.read_bytes() if path.is_file() else b"/")
            )
        return digest.hexdigest()

    before = tree()
    for args in (
        ("runs", "list", url),
        ("runs", "show", url, "run-a"),
        ("runs", "audit", url),
    ):
        assert rulvar(*args).exit_code in (0, 1)
    assert tree() == before
