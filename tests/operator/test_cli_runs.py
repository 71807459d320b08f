"""``rulvar runs`` over file, SQLite and PostgreSQL URLs: output, exit codes, bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.operator._journals import entry, running, settle, suspension, write_run
from tests.operator._places import CliResult, Place

Rulvar = Callable[..., CliResult]


def _url(place: Place) -> str:
    assert place.url is not None
    return place.url


def _seed_divergences(place: Place) -> None:
    """run-behind (meta-behind), run-ok (consistent), run-stranded, run-suspect."""
    store = place.open().journal
    write_run(
        store,
        "run-ok",
        [running(0), entry(1, "agent", "ok", ref=0), settle(2, "ok")],
        "ok",
        name="nightly",
        tags=["team:core"],
    )
    write_run(
        store,
        "run-behind",
        [entry(0, "step", "ok"), settle(1, "ok")],
        "running",
        name="nightly",
        keep={"x": 1},
    )
    write_run(
        store, "run-stranded", [settle(0, "ok"), running(1)], "ok", tags=["team:core"]
    )
    write_run(store, "run-suspect", [suspension(0)], "ok")


@pytest.mark.clause("A5")
def test_runs_list_prints_every_run_and_filters(
    url_place: Place, rulvar: Rulvar
) -> None:
    """A5: runs list shows every run with its status; --status, --name and --tag narrow it."""
    _seed_divergences(url_place)
    url = _url(url_place)
    result = rulvar("runs", "list", url)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["RUN", "STATUS", "NAME", "UPDATED"]
    assert [line.split()[0] for line in lines[1:]] == [
        "run-behind",
        "run-ok",
        "run-stranded",
        "run-suspect",
    ]
    assert "4 runs" in result.stderr
    only = rulvar("runs", "list", url, "--status", "running", "--json")
    assert [row["runId"] for row in json.loads(only.stdout)["runs"]] == ["run-behind"]
    named = rulvar(
        "runs", "list", url, "--name", "nightly", "--tag", "team:core", "--json"
    )
    assert [row["runId"] for row in json.loads(named.stdout)["runs"]] == ["run-ok"]
    either = rulvar(
        "runs", "list", url, "--status", "running", "--status", "ok", "--json"
    )
    assert json.loads(either.stdout)["count"] == 4


@pytest.mark.clause("A2")
def test_runs_show_reports_meta_lease_journal_settle_dangling_and_blobs(
    url_place: Place, rulvar: Rulvar
) -> None:
    """A2: runs show prints the meta, lease holder, journal length and tail, settle, dangling seqs, blobs with sizes."""
    _seed_divergences(url_place)
    opened = url_place.open()
    opened.transcripts.put("run-stranded/ckpt/1", b"12345")
    leased = url_place.backend != "file"
    if leased:
        opened.journal.acquire("run-stranded", "worker-7")  # type: ignore[attr-defined]
    result = rulvar("runs", "show", _url(url_place), "run-stranded")
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert "journal  2 entries" in text
    assert "settle   ok at seq 0" in text
    assert "dangling 1 (seqs 1)" in text
    assert "audit    stranded:" in text
    assert "run-stranded/ckpt/1  5 bytes" in text
    if leased:
        assert "lease    worker-7 epoch 1" in text
        assert "(live," in text
    report = json.loads(
        rulvar("runs", "show", _url(url_place), "run-stranded", "--json").stdout
    )
    assert report["meta"]["status"] == "ok"
    assert report["journalEntries"] == 2
    assert report["danglingSeqs"] == [1]
    assert report["blobs"] == [{"ref": "run-stranded/ckpt/1", "bytes": 5}]
    assert report["audit"]["repairTo"] == "running"
    assert [e["seq"] for e in report["tail"]] == [0, 1]


def test_runs_show_of_an_unknown_run_exits_1(url_place: Place, rulvar: Rulvar) -> None:
    """An unknown run is named on stderr with exit 1; nothing is printed on stdout."""
    _seed_divergences(url_place)
    result = rulvar("runs", "show", _url(url_place), "no-such-run")
    assert result.exit_code == 1
    assert "no run 'no-such-run'" in result.stderr
    assert result.stdout == ""


@pytest.mark.clause("A6")
def test_runs_audit_prints_one_line_per_divergence_and_exits_1(
    url_place: Place, rulvar: Rulvar
) -> None:
    """A6: '<runId> <verdict>: <reason>' per non-consistent run; without --repair all remain, exit 1."""
    _seed_divergences(url_place)
    result = rulvar("runs", "audit", _url(url_place))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "run-behind meta-behind",
        "run-stranded stranded",
        "run-suspect suspect",
    ]
    assert "3 of 3 reported runs remain" in result.stderr


@pytest.mark.clause("A6")
def test_runs_audit_repair_fixes_what_it_may_and_keeps_the_rest(
    url_place: Place, rulvar: Rulvar
) -> None:
    """A6: --repair rewrites meta-behind and stranded runs (suffix names the status); suspect remains, exit 1."""
    _seed_divergences(url_place)
    result = rulvar("runs", "audit", _url(url_place), "--repair")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].endswith(" (repaired to 'ok')")
    assert lines[1].endswith(" (repaired to 'running')")
    assert lines[2].startswith("run-suspect suspect: ")
    assert "1 of 3 reported runs remain" in result.stderr
    metas = {m["runId"]: m for m in url_place.open().journal.list_runs()}
    assert metas["run-behind"]["status"] == "ok"
    assert metas["run-behind"]["keep"] == {"x": 1}
    assert metas["run-stranded"]["status"] == "running"
    again = rulvar("runs", "audit", _url(url_place))
    assert again.stdout.splitlines() == [lines[2]]


@pytest.mark.clause("A6")
def test_runs_audit_exit_0_when_every_divergence_is_repaired(
    url_place: Place, rulvar: Rulvar
) -> None:
    """A6: with only repairable divergences, --repair ends with 'every divergence repaired' and exit 0."""
    store = url_place.open().journal
    write_run(store, "run-behind", [entry(0, "step", "ok"), settle(1, "ok")], "running")
    result = rulvar("runs", "audit", _url(url_place), "--repair", "--json")
    assert result.exit_code == 0, result.stderr
    assert "every divergence repaired" in result.stderr
    report = json.loads(result.stdout)
    assert (report["reported"], report["repaired"], report["remaining"]) == (1, 1, 0)
    assert report["runs"][0]["action"] == "repaired"
    clean = rulvar("runs", "audit", _url(url_place))
    assert clean.exit_code == 0
    assert clean.stdout == ""
    assert "every run is consistent with its journal" in clean.stderr


@pytest.mark.clause("A6")
def test_runs_audit_repair_skips_a_run_leased_by_a_live_owner(
    url_place: Place, rulvar: Rulvar
) -> None:
    """A6: a run leased by a live owner gets ' (leased by a live owner, skipped)', stays unrepaired, exit 1."""
    if url_place.backend == "file":
        pytest.skip("the file store has no leases")
    store = url_place.open().journal
    write_run(store, "run-behind", [entry(0, "step", "ok"), settle(1, "ok")], "running")
    store.acquire("run-behind", "worker-1")  # type: ignore[attr-defined]
    result = rulvar("runs", "audit", _url(url_place), "--repair")
    assert result.exit_code == 1
    assert result.stdout.rstrip().endswith(" (leased by a live owner, skipped)")
    assert store.list_runs()[0]["status"] == "running"


@pytest.mark.clause("A6")
def test_runs_audit_sanitizes_control_characters(
    tmp_path: Path, rulvar: Rulvar
) -> None:
    """A6: terminal control characters in run ids and reasons are printed as escapes.

    Our stores refuse such ids on write, so the row is renamed in place, as a
    store written by another implementation could hold it.
    """
    import apsw

    from rulvar_store import open_store

    path = tmp_path / "runs.db"
    url = f"sqlite:///{path}"
    with open_store(url) as opened:
        write_run(
            opened.journal,
            "evil",
            [entry(0, "step", "ok"), settle(1, "ok")],
            "running",
        )
    evil = "evil\x1b[2J\u202erun"
    conn = apsw.Connection(str(path))
    try:
        for table in ("entries", "meta"):
            conn.execute(
                f"UPDATE {table} SET run_id = ? WHERE run_id = 'evil'", (evil,)
            )
        conn.execute(
            "UPDATE meta SET payload = json_set(payload, '$.runId', ?)", (evil,)
        )
    finally:
        conn.close()
    for args in (("runs", "audit", url), ("runs", "list", url)):
        result = rulvar(*args)
        assert "\x1b" not in result.stdout
        assert "\u202e" not in result.stdout
        assert "evil\\x1b[2J\\u202erun" in result.stdout


@pytest.mark.clause("A6")
def test_verify_only_file_url_with_repair_exits_1(
    tmp_path: Path, rulvar: Rulvar
) -> None:
    """A6: a verify-only load switch (file:// repair=false) together with --repair exits 1."""
    result = rulvar("runs", "audit", f"file://{tmp_path}?repair=false", "--repair")
    assert result.exit_code == 1
    assert "repair=false" in result.stderr


@pytest.mark.clause("R1")
def test_runs_delete_removes_runs_and_names_unknown_ones(
    url_place: Place, rulvar: Rulvar
) -> None:
    """R1: runs delete removes blobs, journal and meta; an unknown run is reported and exits 1."""
    _seed_divergences(url_place)
    opened = url_place.open()
    opened.transcripts.put("run-ok/t1", b"x")
    result = rulvar("runs", "delete", _url(url_place), "run-ok", "no-such-run")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == ["run-ok: deleted"]
    assert "no-such-run: no such run" in result.stderr
    assert "run-ok" not in [m["runId"] for m in opened.journal.list_runs()]
    assert opened.transcripts.list_refs("run-ok") == []


@pytest.mark.clause("R3")
def test_runs_delete_skips_a_live_run(url_place: Place, rulvar: Rulvar) -> None:
    """R3: runs delete never deletes a run leased by a live owner; it says so and exits 1."""
    if url_place.backend == "file":
        pytest.skip("the file store has no leases")
    _seed_divergences(url_place)
    store = url_place.open().journal
    store.acquire("run-ok", "worker-1")  # type: ignore[attr-defined]
    result = rulvar("runs", "delete", _url(url_place), "run-ok")
    assert result.exit_code == 1
    assert result.stdout.startswith("run-ok: skipped, leased by a live owner")
    assert len(store.load("run-ok")) == 3


@pytest.mark.clause("R2")
def test_runs_prune_deletes_unreferenced_checkpoints(
    url_place: Place, rulvar: Rulvar
) -> None:
    """R2: runs prune reports how many checkpoints it deleted and leaves referenced ones."""
    opened = url_place.open()
    entries = [
        running(0),
        entry(1, "agent", "ok", ref=0, checkpointRef="run-a/ckpt/0"),
        running(2),
        entry(3, "agent", "ok", ref=2, checkpointRef="run-a/ckpt/2"),
        entry(4, "step", "ok", value={"resumeFrom": "run-a/ckpt/2"}),
    ]
    write_run(opened.journal, "run-a", entries, "ok")
    opened.transcripts.put("run-a/ckpt/0", b"a")
    opened.transcripts.put("run-a/ckpt/2", b"b")
    result = rulvar("runs", "prune", _url(url_place), "run-a")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "run-a: pruned 1 checkpoint"
    assert opened.transcripts.list_refs("run-a") == ["run-a/ckpt/2"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("runs", "list", "not-a-url"), "malformed store URL"),
        (("runs", "list", "nosuch://x"), "no store backend for scheme 'nosuch'"),
        (
            ("runs", "audit", "sqlite:///{tmp}/missing.db"),
            "unable to open database file",
        ),
        (
            ("runs", "show", "sqlite:///{tmp}/not-a-db.db", "run-a"),
            "is not a SQLite database file",
        ),
        (("runs", "list", "sqlite:///{tmp}/empty.db"), "no rulvar store tables"),
        (
            ("runs", "list", "sqlite:///{tmp}/x.db", "--timeout", "0"),
            "--timeout must be above 0",
        ),
        (("runs", "delete", "sqlite:///{tmp}/x.db"), "Missing argument"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, rulvar: Rulvar, args: tuple[str, ...], needle: str
) -> None:
    """A bad URL, an unknown scheme, a missing, foreign or empty file, a bad option: exit 2, no traceback."""
    (tmp_path / "not-a-db.db").write_bytes(b"this is not a database, just text\n" * 200)
    import apsw

    apsw.Connection(str(tmp_path / "empty.db")).execute("CREATE TABLE other (x)")
    result = rulvar(*(arg.replace("{tmp}", str(tmp_path)) for arg in args))
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert needle in result.stderr
    assert "Traceback" not in result.stderr


def test_a_missing_postgres_schema_is_reported_not_created(rulvar: Rulvar) -> None:
    """A read-only command over a schema that holds no store is a configuration error (exit 2) and creates nothing."""
    import psycopg

    from tests.operator._places import postgres_url, with_query

    admin = postgres_url()
    result = rulvar("runs", "list", with_query(admin, schema="rulvar_op_absent"))
    assert result.exit_code == 2
    assert "holds no rulvar store" in result.stderr
    with psycopg.connect(admin, autocommit=True) as conn:
        found = conn.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = 'rulvar_op_absent'"
        ).fetchall()
    assert found == []


def test_writers_never_create_a_missing_store(tmp_path: Path, rulvar: Rulvar) -> None:
    """A mistyped SQLite path for delete or --repair is an error (exit 2), not a new empty database."""
    for args in (
        ("runs", "delete", "{db}", "run-a"),
        ("runs", "audit", "{db}", "--repair"),
    ):
        url = f"sqlite:///{tmp_path / 'typo.db'}"
        result = rulvar(*(arg.replace("{db}", url) for arg in args))
        assert result.exit_code == 2, result.stderr
        assert "unable to open database file" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_postgres_writers_never_create_a_missing_schema(rulvar: Rulvar) -> None:
    """A mistyped schema for delete or --repair is a configuration error (exit 2) and no schema is created."""
    import psycopg

    from tests.operator._places import postgres_url, with_query

    admin = postgres_url()
    url = with_query(admin, schema="rulvar_op_typo")
    for args in (("runs", "delete", url, "run-a"), ("runs", "audit", url, "--repair")):
        result = rulvar(*args)
        assert result.exit_code == 2, result.stderr
        assert "holds no rulvar store" in result.stderr
    with psycopg.connect(admin, autocommit=True) as conn:
        found = conn.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = 'rulvar_op_typo'"
        ).fetchall()
    assert found == []
