"""SqliteStore against the dict model: two instances over one temp file, one clock."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable

import pytest

from rulvar_store_sqlite import SqliteStore
from tests.stateful._machine import (
    MachineStore,
    machine_settings,
    make_store_machine,
)


def open_sqlite_pair(
    now: Callable[[], int], ttl_ms: int
) -> tuple[MachineStore, MachineStore, Callable[[], None]]:
    """Two SqliteStore instances (two connections) over one fresh file."""
    directory = tempfile.mkdtemp(prefix="rulvar-stateful-")
    path = os.path.join(directory, "store.db")
    # NORMAL only to keep the run short: durability is not under test here.
    a = SqliteStore(path, ttl_ms=ttl_ms, now=now, synchronous="NORMAL")
    b = SqliteStore(path, ttl_ms=ttl_ms, now=now, synchronous="NORMAL")

    def cleanup() -> None:
        a.close()
        b.close()
        shutil.rmtree(directory, ignore_errors=True)

    return a, b, cleanup


SqliteMachine = make_store_machine(open_sqlite_pair)
TestSqliteStateful = pytest.mark.clause("L6")(SqliteMachine.TestCase)
TestSqliteStateful.settings = machine_settings()
