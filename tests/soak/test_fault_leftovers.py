"""A fault soak killed with SIGKILL leaves namespaces and a postmaster; the next removes them.

The owner records are checked on their own (a live owner's resource is kept, a
dead or reused pid's is removed, a failed removal is retried), then end to end:
a real child process makes a fabric and a private cluster and is SIGKILLed, and
the next fabric and cluster made here remove what it left. The end-to-end case
needs root and PostgreSQL's server binaries; without them it skips with the
reason (under ``CI=true`` it fails: CI runs as root).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rulvar_conformance.faults import _leftovers
from rulvar_conformance.faults._leftovers import claim, records_dir, sweep
from rulvar_conformance.faults.netns import HostFabric, netns_available
from rulvar_conformance.faults.pg_cluster import PrivateCluster, find_pg_bin, free_port
from tests._postgres_gate import in_ci

pytestmark = pytest.mark.soak


def _need(reason: str | None) -> None:
    if reason is None:
        return
    if in_ci():
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RULVAR_FAULTS_RECORDS", str(tmp_path / "records"))
    return records_dir()


def _claimed_by_a_process_that_exited(kind: str, tag: str) -> None:
    code = f"from rulvar_conformance.faults._leftovers import claim; claim({kind!r}, {tag!r})"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.clause("S13")
def test_only_resources_whose_owner_is_gone_are_removed(records: Path) -> None:
    mine = claim("thing", "live")
    _claimed_by_a_process_that_exited("thing", "dead")
    reused = claim("thing", "reused")
    record = json.loads(reused.read_text())
    record["started"] -= 1  # the same pid, but another process's start time
    reused.write_text(json.dumps(record))
    removed: list[str] = []

    assert sorted(sweep("thing", lambda found: removed.append(found["tag"]))) == [
        "dead",
        "reused",
    ]
    assert sorted(removed) == ["dead", "reused"]
    assert sorted(path.name for path in records.iterdir()) == [mine.name]
    assert sweep("other-kind", lambda found: removed.append(found["tag"])) == []


@pytest.mark.clause("S13")
def test_a_removal_that_fails_is_tried_again_by_the_next_sweep(records: Path) -> None:
    _claimed_by_a_process_that_exited("thing", "stubborn")

    def refuse(_record: _leftovers.OwnerRecord) -> None:
        raise OSError("device busy")

    assert sweep("thing", refuse) == []
    assert sweep("thing", lambda _record: None) == ["stubborn"]
    assert list(records.iterdir()) == []


_SOAK_THAT_DIES = textwrap.dedent(
    """
    import sys, time
    from rulvar_conformance.faults.netns import HostFabric
    from rulvar_conformance.faults.pg_cluster import PrivateCluster
    fabric = HostFabric(1).open()
    cluster = PrivateCluster(fabric.server_address, int(sys.argv[1]))
    cluster.init()
    cluster.start()
    print(fabric.tag, fabric.namespace(0), cluster.root, cluster.postmaster_pid(),
          flush=True)
    time.sleep(600)
    """
)


def _namespaces() -> str:
    return subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, check=True
    ).stdout


def _links() -> str:
    return subprocess.run(
        ["ip", "-o", "link", "show"], capture_output=True, text=True, check=True
    ).stdout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return _leftovers._start_time(pid) is not None


@pytest.mark.clause("S13")
def test_the_next_soak_removes_what_a_sigkilled_soak_left(records: Path) -> None:
    _need(netns_available())
    _need(None if find_pg_bin() else "no PostgreSQL server binaries (initdb, pg_ctl)")
    with subprocess.Popen(
        [sys.executable, "-c", _SOAK_THAT_DIES, str(free_port())],
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None
            tag, namespace, root, postmaster = child.stdout.readline().split()
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(60)
    # What SIGKILL leaves: nothing of the child's cleanup ran.
    assert namespace in _namespaces()
    assert f"rv{tag}b" in _links()
    assert _alive(int(postmaster))
    assert Path(root).is_dir()

    fabric = HostFabric(1).open()
    fabric.close()
    cluster = PrivateCluster("127.0.0.1", free_port())
    try:
        cluster.init()
    finally:
        cluster.destroy()

    assert namespace not in _namespaces()
    assert f"rv{tag}" not in _links()
    assert not _alive(int(postmaster))
    assert not Path(root).exists()
    assert list(records.iterdir()) == []
