"""Driver errors never cross the SPI: one translation, typed and chained (CONTRACT 1.6)."""

from __future__ import annotations

import pickle

import apsw
import pytest

from rulvar_store import (
    ConfigError,
    ContractError,
    RulvarError,
    StoreBusyError,
    StoreClosedError,
    StoreUnavailableError,
)
from rulvar_store_sqlite._errors import is_busy, translate, translate_errors


def with_extended(exc: apsw.Error, code: int) -> apsw.Error:
    exc.extendedresult = code  # type: ignore[attr-defined]  # apsw sets it on real errors
    return exc


@pytest.mark.parametrize(
    ("driver_error", "opening", "typed"),
    [
        (apsw.BusyError("database is locked"), False, StoreBusyError),
        (apsw.LockedError("database table is locked"), False, StoreBusyError),
        (with_extended(apsw.IOError("busy recovery"), 261), False, StoreBusyError),
        (with_extended(apsw.IOError("busy snapshot"), 517), False, StoreBusyError),
        (apsw.ConnectionClosedError("closed"), False, StoreClosedError),
        (apsw.TooBigError("string or blob too big"), False, ContractError),
        (apsw.CantOpenError("unable to open"), True, ConfigError),
        (apsw.NotADBError("file is not a database"), True, ConfigError),
        (apsw.CantOpenError("unable to open"), False, StoreUnavailableError),
        (apsw.IOError("disk I/O error"), False, StoreUnavailableError),
        (apsw.FullError("database or disk is full"), False, StoreUnavailableError),
        (apsw.SQLError("no such column: payload"), False, ConfigError),
        (apsw.CorruptError("database disk image is malformed"), False, ConfigError),
        (apsw.ConstraintError("NOT NULL constraint failed"), False, ContractError),
        (
            with_extended(apsw.ReadOnlyError("recovery"), 264),
            False,
            StoreUnavailableError,
        ),
        (with_extended(apsw.ReadOnlyError("moved"), 1032), False, ConfigError),
    ],
    ids=[
        "busy",
        "locked",
        "busy-recovery-261",
        "busy-snapshot-517",
        "connection-closed",
        "too-big",
        "cant-open-at-open",
        "not-a-db-at-open",
        "cant-open-later",
        "ioerr",
        "disk-full",
        "foreign-table-shape",
        "corrupt",
        "constraint",
        "readonly-recovery-264",
        "readonly-dbmoved-1032",
    ],
)
def test_driver_errors_map_to_the_spi_tree(
    driver_error: apsw.Error, opening: bool, typed: type[RulvarError]
) -> None:
    """Each apsw error class lands on the documented SPI class.

    Only transient conditions (busy, I/O, a full disk, recovery in progress) are
    retryable; the data, the setup and a closed store never are.
    """
    with pytest.raises(typed) as raised, translate_errors("append", opening=opening):
        raise driver_error
    assert raised.value.__cause__ is driver_error
    assert "append" in str(raised.value)
    assert type(pickle.loads(pickle.dumps(raised.value))) is typed
    assert raised.value.retryable is (typed in (StoreBusyError, StoreUnavailableError))


def test_busy_family_is_recognized_by_the_low_byte() -> None:
    """SQLITE_BUSY (5) and its extended codes are busy; SQLITE_IOERR (10) is not."""
    assert is_busy(apsw.BusyError("x"))
    assert is_busy(with_extended(apsw.Error("x"), 5 | 3 << 8))
    assert not is_busy(with_extended(apsw.IOError("x"), 10))
    assert translate(apsw.BusyError("x"), "acquire").retryable


def test_non_driver_exceptions_pass_through_untouched() -> None:
    """SPI errors and plain Python errors raised inside keep their identity."""
    with pytest.raises(ValueError, match="plain"), translate_errors("append"):
        raise ValueError("plain")
