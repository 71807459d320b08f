"""Concurrent boot (Q4, X6, S11): the bootstrap unit is retried on busy, bounded."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import apsw
import pytest

from rulvar_store import ConfigError, StoreBusyError
from rulvar_store_sqlite import BOOT_BUSY_TIMEOUT_MS, SqliteStore
from rulvar_store_sqlite._boot import boot_with_retry
from rulvar_store_sqlite._schema import bootstrap


class FakeTime:
    """Monotonic clock advanced only by the retry loop's sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def busy(extended: int | None = None) -> apsw.Error:
    exc: apsw.Error = apsw.BusyError("database is locked")
    if extended is not None:
        exc = apsw.IOError("disk I/O error")
        exc.extendedresult = extended  # type: ignore[attr-defined]  # set by apsw normally
    return exc


@pytest.mark.clause("Q4")
@pytest.mark.clause("X6")
def test_busy_bootstrap_is_retried_until_it_succeeds() -> None:
    """Busy three times (plain, BUSY_RECOVERY 261, BUSY_SNAPSHOT 517), then success."""
    fake = FakeTime()
    failures = [busy(), busy(261), busy(517)]
    calls: list[int] = []

    def attempt() -> str:
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return "booted"

    result = boot_with_retry(attempt, sleep=fake.sleep, monotonic=fake.monotonic)
    assert result == "booted"
    assert len(calls) == 4
    assert fake.sleeps == [0.002, 0.003, 0.004]  # 2 + attempt % 7 ms


@pytest.mark.clause("X6")
def test_busy_past_the_bound_raises_typed_busy_chained_to_the_driver_error() -> None:
    """Still busy after BOOT_BUSY_TIMEOUT_MS: StoreBusyError from apsw.BusyError."""
    fake = FakeTime()

    def attempt() -> None:
        raise busy()

    with pytest.raises(StoreBusyError) as raised:
        boot_with_retry(attempt, sleep=fake.sleep, monotonic=fake.monotonic)
    assert isinstance(raised.value.__cause__, apsw.BusyError)
    waited_ms = sum(fake.sleeps) * 1000
    assert BOOT_BUSY_TIMEOUT_MS <= waited_ms < BOOT_BUSY_TIMEOUT_MS + 10
    assert fake.sleeps[:8] == [0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008, 0.002]


@pytest.mark.clause("X6")
@pytest.mark.parametrize(
    ("error", "typed"),
    [
        (
            apsw.CorruptError("database disk image is malformed"),
            ConfigError,
        ),  # permanent: never retryable
        (apsw.NotADBError("file is not a database"), ConfigError),
    ],
    ids=["corrupt", "not-a-db"],
)
def test_non_busy_bootstrap_error_is_not_retried(
    error: apsw.Error, typed: type[Exception]
) -> None:
    """A non-busy driver error surfaces at once, typed and chained."""
    fake = FakeTime()
    calls: list[int] = []

    def attempt() -> None:
        calls.append(1)
        raise error

    with pytest.raises(typed) as raised:
        boot_with_retry(attempt, sleep=fake.sleep, monotonic=fake.monotonic)
    assert calls == [1]
    assert fake.sleeps == []
    assert raised.value.__cause__ is error


@pytest.mark.clause("X6")
def test_store_boots_through_an_injected_busy_bootstrap(db_path: str) -> None:
    """The store's bootstrap is injectable: busy twice, then the real one runs."""
    calls: list[int] = []

    def flaky(connection: apsw.Connection, in_memory: bool) -> None:
        calls.append(1)
        if len(calls) <= 2:
            raise apsw.BusyError("database is locked")
        bootstrap(connection, in_memory)

    with SqliteStore(db_path, _boot_attempt=flaky) as store:
        store.append("run", {"seq": 0})
        assert store.load("run") == [{"seq": 0}]
    assert len(calls) == 3


def test_store_boot_non_busy_failure_is_typed_and_not_retried(db_path: str) -> None:
    """A non-busy failure inside the store's bootstrap is raised once, typed."""
    calls: list[int] = []

    def broken(connection: apsw.Connection, in_memory: bool) -> None:
        calls.append(1)
        raise apsw.CorruptError("database disk image is malformed")

    with pytest.raises(ConfigError) as raised:  # a corrupt file: permanent
        SqliteStore(db_path, _boot_attempt=broken)
    assert not raised.value.retryable
    assert calls == [1]


BOOT_CHILD = textwrap.dedent(
    """
    import sys, time
    from rulvar_store_sqlite import SqliteStore
    path, start_at = sys.argv[1], float(sys.argv[2])
    while time.time() < start_at:
        time.sleep(0.001)
    store = SqliteStore(path, ttl_ms=250)
    store.close()
    """
)


@pytest.mark.clause("S11")
@pytest.mark.clause("X6")
def test_boot_storm_eight_processes_two_rounds_all_exit_zero(tmp_path: Path) -> None:
    """8 processes construct the store at once over one fresh file, twice; all exit 0."""
    cap = time.monotonic() + 60
    for round_number in range(2):
        path = str(tmp_path / f"storm-{round_number}.db")
        start_at = time.time() + 1.5  # every interpreter is up before anyone boots
        children = [
            subprocess.Popen(
                [sys.executable, "-c", BOOT_CHILD, path, repr(start_at)],
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(8)
        ]
        failures = []
        for child in children:
            _, stderr = child.communicate(timeout=max(1.0, cap - time.monotonic()))
            if child.returncode != 0:
                failures.append(f"exit {child.returncode}: {stderr[-2000:]}")
        assert failures == [], f"round {round_number}"
        with SqliteStore(path) as store:
            assert store.load("anything") == []
