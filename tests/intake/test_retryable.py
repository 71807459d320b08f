"""Retryable means retryable: only transient conditions carry ``retryable=True``.

Per backend: the permanent outcomes a caller can provoke (a bad argument, a seq
below the tail, a closed store, a setup problem) are never retryable. For
PostgreSQL, every SQLSTATE class and the driver's client-side errors are
classified, and connection failures say what happened without claiming a commit
was in flight.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import psycopg
import pytest

from rulvar_store import (
    ConfigError,
    ContractError,
    JournalOrderViolation,
    LeaseHeldError,
    RulvarError,
    StoreBusyError,
    StoreUnavailableError,
    open_store,
)
from rulvar_store_postgres._errors import _classify
from tests.intake._rigs import BACKENDS, GOOD_RUN, Rig, make_rig, postgres_url

# SQLSTATEs and the class each must become. Only the right-hand classes
# StoreBusyError and StoreUnavailableError are retryable.
SQLSTATES: dict[str, type[RulvarError]] = {
    "22P02": ContractError,  # invalid text representation
    "22021": ContractError,  # character not in repertoire
    "22P05": ContractError,  # untranslatable character (\u0000 in jsonb)
    "23505": ContractError,  # unique violation
    "23502": ContractError,  # not-null violation
    "54000": ContractError,  # program limit exceeded (index row too large)
    "42601": ConfigError,  # syntax error
    "42703": ConfigError,  # undefined column: a foreign table shape
    "42501": ConfigError,  # insufficient privilege
    "28P01": ConfigError,  # invalid password
    "3D000": ConfigError,  # invalid catalog name
    "0A000": ConfigError,  # feature not supported
    "P0001": ConfigError,  # raise_exception from a trigger someone installed
    "40001": StoreBusyError,  # serialization failure
    "40P01": StoreBusyError,  # deadlock
    "55P03": StoreBusyError,  # lock not available
    "57014": StoreBusyError,  # statement cancelled (timeout)
    "08006": StoreUnavailableError,  # connection failure
    "08001": StoreUnavailableError,  # unable to establish a connection
    "53300": StoreUnavailableError,  # too many connections
    "57P01": StoreUnavailableError,  # admin shutdown
    "58030": StoreUnavailableError,  # I/O error
    "25P03": StoreUnavailableError,  # idle-in-transaction timeout
    "40003": StoreUnavailableError,  # statement completion unknown
    "42P01": StoreUnavailableError,  # tables gone: the next call boots again
    "XX000": StoreUnavailableError,  # internal error
}
RETRYABLE = (StoreBusyError, StoreUnavailableError)


@pytest.mark.parametrize(("state", "expected"), list(SQLSTATES.items()))
def test_sqlstates_are_classified_by_transience(
    state: str, expected: type[RulvarError]
) -> None:
    """Classes 22, 23, 54 (data) and 28, 3D, 42, 0A (setup) are never retryable."""
    error = _classify(psycopg.errors.lookup(state)("detail"), "append", "db", ())
    assert type(error) is expected
    assert error.retryable is (expected in RETRYABLE)


@pytest.mark.parametrize(
    ("driver_error", "expected", "retryable"),
    [
        (
            psycopg.OperationalError(
                'connection failed: connection to server at "127.0.0.1", port 1 '
                "failed: Connection refused"
            ),
            StoreUnavailableError,
            True,
        ),
        (
            psycopg.OperationalError(
                'connection failed: FATAL:  database "nope" does not exist'
            ),
            ConfigError,
            False,
        ),
        (
            psycopg.OperationalError(
                'connection failed: FATAL:  password authentication failed for user "x"'
            ),
            ConfigError,
            False,
        ),
        (
            psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes"),
            ContractError,
            False,
        ),
        (
            psycopg.OperationalError("server closed the connection unexpectedly"),
            StoreUnavailableError,
            True,
        ),
    ],
    ids=["refused", "no-database", "bad-password", "client-nul", "dropped"],
)
def test_client_side_driver_errors_are_classified(
    driver_error: psycopg.Error, expected: type[RulvarError], retryable: bool
) -> None:
    """Errors without a SQLSTATE: connect failures, client refusals, lost connections."""
    error = _classify(driver_error, "append", "db", ())
    assert type(error) is expected
    assert error.retryable is retryable


def test_only_a_write_cut_off_mid_call_claims_an_unknown_outcome() -> None:
    """A refused connection sent nothing; a dropped read wrote nothing."""
    refused = psycopg.OperationalError("connection failed: Connection refused")
    dropped = psycopg.OperationalError("server closed the connection unexpectedly")
    assert "unknown" not in str(_classify(refused, "append", "db", ()))
    assert "nothing was sent" in str(_classify(refused, "append", "db", ()))
    assert "unknown" not in str(_classify(dropped, "load", "db", ()))
    assert "outcome of this write is unknown" in str(
        _classify(dropped, "append", "db", ())
    )


def _refused_url() -> str:
    base = postgres_url()
    return base.replace(":5432/", ":1/") if ":5432/" in base else ""


def test_a_refused_port_is_retryable_and_says_so_without_a_commit() -> None:
    """Against the real client library: nothing listens on port 1."""
    url = _refused_url()
    if not url:
        pytest.skip("the test server URL has no explicit :5432 port to replace")
    with (
        open_store(url, connect_timeout_s=2) as opened,
        pytest.raises(StoreUnavailableError) as caught,
    ):
        opened.journal.load("r")
    assert caught.value.retryable is True
    assert "could not connect" in str(caught.value)
    assert "in-flight" not in str(caught.value)


def test_a_missing_database_is_a_config_error() -> None:
    """The server answers: no such database. No retry can fix that."""
    base = postgres_url()
    head, _, _ = base.rpartition("/")
    with (
        open_store(f"{head}/rulvar_no_such_db", connect_timeout_s=2) as opened,
        pytest.raises(ConfigError) as caught,
    ):
        opened.journal.load("r")
    assert caught.value.retryable is False
    assert "rulvar_no_such_db" in str(caught.value)


_POOL_CHILD = textwrap.dedent(
    """
    import logging, sys
    from rulvar_store import StoreUnavailableError, open_store
    if sys.argv[2] == "configured":
        logging.basicConfig(level=logging.WARNING, format="APP %(name)s %(message)s")
    with open_store(sys.argv[1], connect_timeout_s=2) as opened:
        try:
            opened.journal.load("r")
        except StoreUnavailableError:
            print("typed")
    """
)


def _child(url: str, mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _POOL_CHILD, url, mode],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
        check=False,
    )


def test_pool_log_lines_stay_off_stderr_in_library_use() -> None:
    """psycopg_pool's connection warnings never reach stderr by themselves..."""
    url = _refused_url()
    if not url:
        pytest.skip("the test server URL has no explicit :5432 port to replace")
    quiet = _child(url, "quiet")
    assert quiet.stdout.strip() == "typed"
    assert quiet.stderr == ""


def test_pool_log_lines_reach_an_application_that_configured_logging() -> None:
    """...but an application's own logging configuration still receives them."""
    url = _refused_url()
    if not url:
        pytest.skip("the test server URL has no explicit :5432 port to replace")
    configured = _child(url, "configured")
    assert configured.stdout.strip() == "typed"
    assert "APP psycopg.pool" in configured.stderr


@pytest.fixture(params=BACKENDS)
def fresh_rig(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Rig]:
    yield from make_rig(request.param, tmp_path_factory)


@pytest.mark.clause("J6")
def test_permanent_outcomes_are_never_retryable(fresh_rig: Rig) -> None:
    """A seq below the tail, a bad argument and a closed store, on every backend."""
    outcomes: list[RulvarError] = []
    with pytest.raises(JournalOrderViolation) as order:
        fresh_rig.journal.append(GOOD_RUN, {"seq": 0}, fresh_rig.lease)
    outcomes.append(order.value)
    with pytest.raises(ContractError) as bad:
        fresh_rig.journal.append("", {"seq": 5}, fresh_rig.lease)
    outcomes.append(bad.value)
    fresh_rig.close()
    with pytest.raises(ContractError) as closed:
        fresh_rig.journal.load(GOOD_RUN)
    outcomes.append(closed.value)
    assert [error.retryable for error in outcomes] == [False, False, False]


@pytest.mark.clause("F2")
def test_a_lease_of_another_run_is_refused_and_not_retryable(fresh_rig: Rig) -> None:
    """F2 demands LeaseHeldError; retrying with the same wrong lease never helps."""
    if fresh_rig.lease is None:
        pytest.skip(f"{fresh_rig.backend} stores ignore leases (T8)")
    with pytest.raises(LeaseHeldError) as caught:
        fresh_rig.journal.append("another-run", {"seq": 1}, fresh_rig.lease)
    assert caught.value.retryable is False
    assert fresh_rig.journal.load("another-run") == []
