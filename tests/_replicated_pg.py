"""Private PostgreSQL 15 pairs for the failover tests: a primary and a streaming standby.

Both run from the server binaries (``find_pg_bin``) as the ``postgres`` user,
on free loopback ports, in temporary folders removed afterwards. The standby
is a ``pg_basebackup -R`` of the primary and connects as ``standby1`` (its
``cluster_name``), the name ``synchronous_standby_names`` lists in sync mode.
Nothing here touches the shared test server.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from rulvar_conformance.faults.pg_cluster import (
    PrivateCluster,
    _run_as,  # the same runuser rule
    find_pg_bin,
    free_port,
)
from rulvar_conformance.harness.processes import run_tool
from tests._postgres_gate import in_ci

__all__ = ["Pair", "need_server_binaries", "pair"]

STANDBY: str = "standby1"


def need_server_binaries() -> None:
    reason = None if find_pg_bin() else "no PostgreSQL server binaries (initdb, pg_ctl)"
    if reason is None:
        return
    if in_ci():
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


def _tool(name: str) -> str:
    """A server binary beside the real ``pg_ctl`` (PATH may hold only links to some)."""
    folder = find_pg_bin()
    assert folder is not None
    return str(Path(os.path.realpath(folder / "pg_ctl")).parent / name)


def sql(
    cluster: PrivateCluster, statement: str, args: tuple[Any, ...] = ()
) -> list[Any]:
    """Run one statement on ``cluster`` (its unix socket) and return its rows."""
    with psycopg.connect(cluster.url(), autocommit=True, connect_timeout=5) as conn:
        cursor = conn.execute(statement, args)
        return cursor.fetchall() if cursor.description else []


def set_standby_names(cluster: PrivateCluster, names: str) -> None:
    """Change ``synchronous_standby_names`` on the running server (a reload)."""
    sql(cluster, f"ALTER SYSTEM SET synchronous_standby_names = '{names}'")
    sql(cluster, "SELECT pg_reload_conf()")
    deadline = time.monotonic() + 5
    while sql(cluster, "SHOW synchronous_standby_names")[0][0] != names:
        if time.monotonic() > deadline:  # pragma: no cover - a stuck reload
            raise AssertionError("synchronous_standby_names did not change")
        time.sleep(0.05)


class Pair:
    """A primary, and a standby once ``add_standby`` ran."""

    def __init__(self) -> None:
        self.primary = PrivateCluster("127.0.0.1", free_port())
        self.standby: PrivateCluster | None = None

    def tcp(self, cluster: PrivateCluster) -> str:
        return f"127.0.0.1:{cluster.port}"

    def add_standby(self) -> PrivateCluster:
        standby = PrivateCluster("127.0.0.1", free_port(), {"cluster_name": STANDBY})
        if os.geteuid() == 0:
            shutil.chown(standby.root, "postgres")
        done = run_tool(
            [
                *_run_as(),
                _tool("pg_basebackup"),
                "-D", str(standby.data),
                "-h", self.primary.socket_dir,
                "-p", str(self.primary.port),
                "-U", "postgres",
                "-R", "-X", "stream", "-c", "fast",
            ],
            60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-800:]
        standby.start()
        self.standby = standby
        deadline = time.monotonic() + 15
        while not sql(
            self.primary,
            "SELECT 1 FROM pg_stat_replication WHERE application_name = %s "
            "AND state = 'streaming'",
            (STANDBY,),
        ):
            assert time.monotonic() < deadline, "the standby never streamed"
            time.sleep(0.1)
        return standby

    def promote(self) -> None:
        """Promote the standby (the primary keeps running: a zombie)."""
        assert self.standby is not None
        done = run_tool(
            [
                *_run_as(),
                _tool("pg_ctl"),
                "-D",
                str(self.standby.data),
                "-w",
                "promote",
            ],
            60,
        )
        assert done.returncode == 0, done.stdout + done.stderr

    def freeze(self, cluster: PrivateCluster, sig: int = signal.SIGSTOP) -> None:
        """SIGSTOP (or SIGCONT) the postmaster and every backend of ``cluster``."""
        from rulvar_conformance.faults.pg_cluster import _children_of

        pid = cluster.postmaster_pid()
        assert pid is not None
        for victim in (pid, *_children_of(pid)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, sig)

    def destroy(self) -> None:
        for cluster in (self.standby, self.primary):
            if cluster is not None:
                with contextlib.suppress(Exception):
                    self.freeze(cluster, signal.SIGCONT)
                cluster.destroy()


@contextlib.contextmanager
def pair(standby: bool = False) -> Iterator[Pair]:
    """A started primary (and standby): destroyed on exit whatever happened."""
    need_server_binaries()
    made = Pair()
    try:
        made.primary.init()
        made.primary.start()
        if standby:
            made.add_standby()
        yield made
    finally:
        made.destroy()
