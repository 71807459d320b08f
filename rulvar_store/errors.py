"""The error tree every store speaks; it branches on what the caller does next::

    RulvarError                    never raised bare; has code, retryable, data
    ├── ContractError              the caller broke the SPI: a bug, don't retry
    │   ├── JournalOrderViolation  J6 seq guard, unsafe file-store names
    │   ├── InvalidArgumentError   an argument breaks the intake rules (names the argument)
    │   │   ├── NotJsonError       a value is not JSON (also a TypeError and a ValueError, D2)
    │   │   └── UnsafeNameError    not a safe file name (also a JournalOrderViolation, T8/T9)
    │   ├── UnreadableRecordError  a stored record Python cannot read (also a ValueError)
    │   ├── CopyConflictError      a copy's destination holds another run under that id
    │   ├── ArchiveError           a run archive is damaged or of an unknown version
    │   ├── StoreClosedError       the store (or its blob twin) was closed
    │   └── ForkedStoreError       a handle opened in a parent process was used in a forked child
    ├── LeaseHeldError             ownership conflict: re-acquire later or give up (retryable)
    │   ├── LeaseRunMismatchError  F2: the lease names another run (a bug: not retryable)
    │   ├── LeaseLostError         a holder's own lease is gone (L10): stop the work, requeue
    │   └── RunMovedError          the run was moved to another store (V4: not retryable)
    ├── SupersededError            run settlement bounced off the fence
    ├── SettlementError            run settlement failed for another reason (retryable)
    ├── StoreBusyError             transient contention outlasted its bound: retry
    ├── StoreUnavailableError      backend unreachable or connection lost: retry, outcome unknown
    └── ConfigError                bad URL, option, schema version or capability claim
        └── MissingExtraError      a driver's extra is not installed (also a ModuleNotFoundError)

Every class passes all its constructor arguments to ``Exception.__init__`` so that
instances pickle with their fields: soak and kill-point children report errors
across process boundaries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

__all__ = [
    "ArchiveError",
    "ConfigError",
    "ContractError",
    "CopyConflictError",
    "ForkedStoreError",
    "InvalidArgumentError",
    "JournalOrderViolation",
    "LeaseHeldError",
    "LeaseLostError",
    "LeaseRunMismatchError",
    "MissingExtraError",
    "NotJsonError",
    "RulvarError",
    "RunMovedError",
    "SettlementError",
    "StoreBusyError",
    "StoreClosedError",
    "StoreUnavailableError",
    "SupersededError",
    "UnreadableRecordError",
    "UnsafeNameError",
]

SettlementStage = Literal["run-settle", "meta"]


class RulvarError(Exception):
    """Base of the tree; subclasses fix ``code`` and ``retryable``."""

    code: str = "rulvar"
    retryable: bool = False

    def __init__(self, message: str, *args: Any) -> None:
        super().__init__(message, *args)
        self.message: Final = message

    @property
    def data(self) -> dict[str, Any]:
        """Structured details for the wire; empty unless a subclass has fields."""
        return {}

    def to_wire(self) -> dict[str, Any]:
        """Return a JSON-safe description (code, message, retryable, data)."""
        return {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
            "data": self.data,
        }

    def __str__(self) -> str:
        return self.message


class ContractError(RulvarError):
    """The caller broke the SPI; retrying the same call cannot help."""

    code = "contract"


class JournalOrderViolation(ContractError):
    """An append's seq was not above the run's tail (J6), or a name was unsafe."""

    code = "journal_order_violation"

    def __init__(
        self, message: str, run_id: str | None = None, seq: float | None = None
    ) -> None:
        super().__init__(message, run_id, seq)
        self.run_id = run_id
        self.seq = seq

    @property
    def data(self) -> dict[str, Any]:
        return {"runId": self.run_id, "seq": self.seq}


class InvalidArgumentError(ContractError):
    """An argument breaks the intake rules every store applies before any I/O.

    ``operation`` is the store method, ``argument`` the parameter at fault
    (``run_id``, ``owner``, ``ref``, ``entry``, ``meta``, ``lease``, ...).
    Nothing was persisted; the same call can never succeed, so never retry it.
    """

    code = "invalid_argument"

    def __init__(self, message: str, operation: str, argument: str) -> None:
        super().__init__(message, operation, argument)
        self.operation = operation
        self.argument = argument

    @property
    def data(self) -> dict[str, Any]:
        return {"operation": self.operation, "argument": self.argument}


class NotJsonError(InvalidArgumentError, TypeError, ValueError):
    """An entry or meta record is not a JSON value the stores can keep (D2).

    A set, a datetime, NaN or Infinity, a non-string key, a lone surrogate, a
    NUL character or a record past the size bound. It is also a ``TypeError``
    and a ``ValueError``, the exceptions D2 names, so code written against
    either keeps working.
    """

    code = "not_json"


class UnreadableRecordError(ContractError, ValueError):
    """A stored record this reader cannot turn into a value; that record only.

    Another writer (a worker in another language, a hand edit) left text that
    parses nowhere here, for example a value nested deeper than Python's parser
    recurses. Retrying reads the same bytes, so it is not retryable; other
    records are unaffected, and listings name this one instead of failing. It is
    also a ``ValueError``, what a record that is not JSON raises.
    """

    code = "unreadable_record"

    def __init__(
        self,
        message: str,
        readable: Sequence[Any] = (),
        run_ids: Sequence[str] = (),
    ) -> None:
        super().__init__(message, list(readable), tuple(run_ids))
        #: A listing's records that did read (filtered as asked), in its order.
        self.readable: list[Any] = list(readable)
        #: The runs whose records did not (a listing names them all).
        self.run_ids: tuple[str, ...] = tuple(run_ids)

    @property
    def data(self) -> dict[str, Any]:
        return {"run_ids": list(self.run_ids)}


class UnsafeNameError(InvalidArgumentError, JournalOrderViolation):
    """A run id or ref segment is not a safe file name (T8, T9; file stores only).

    File-backed stores accept only ``[A-Za-z0-9._-]``, 1-200 characters, not
    ``.``/``..``, on top of the rules every store applies. It is also a
    ``JournalOrderViolation``, the class the contract names for unsafe names.
    """

    code = "unsafe_name"

    def __init__(self, message: str, operation: str, argument: str) -> None:
        super().__init__(message, operation, argument)
        # JournalOrderViolation's fields mean nothing here (its __init__ ran with
        # our arguments through the MRO): reset them.
        self.run_id = None
        self.seq = None

    @property
    def data(self) -> dict[str, Any]:
        return {"operation": self.operation, "argument": self.argument}


class _HandleUnusableError(ContractError):
    """The handle itself cannot serve ``operation``, whatever its arguments."""

    def __init__(self, message: str, operation: str | None = None) -> None:
        super().__init__(message, operation)
        self.operation = operation

    @property
    def data(self) -> dict[str, Any]:
        return {"operation": self.operation}


class StoreClosedError(_HandleUnusableError):
    """The store, or the blob twin that lives and dies with it, was closed."""

    code = "store_closed"


class ForkedStoreError(_HandleUnusableError):
    """A store handle crossed a ``fork``: the child must open its own handle.

    A forked child shares its parent's sockets, file locks and worker threads
    only in name: answers would cross between the processes. The store refuses
    before touching any of them, so the parent's handle stays intact.
    """

    code = "forked_store"


class LeaseHeldError(RulvarError):
    """The run is leased by someone else, or the presented lease is not live (L1, L6).

    For a refused ``acquire``, ``owner`` and ``epoch`` are the live holder's and
    ``retry_after_ms`` says when its lease expires unless renewed (the earliest
    moment an acquire can succeed while the holder lives; ``None`` when the
    store could not tell). For a refused leased write they are the presented
    lease's.
    """

    code = "lease_held"
    retryable = True

    def __init__(
        self,
        message: str,
        run_id: str | None = None,
        owner: str | None = None,
        epoch: int | None = None,
        retry_after_ms: int | None = None,
        *extra: Any,
    ) -> None:
        super().__init__(message, run_id, owner, epoch, retry_after_ms, *extra)
        self.run_id = run_id
        self.owner = owner
        self.epoch = epoch
        self.retry_after_ms = retry_after_ms

    @property
    def holder(self) -> str | None:
        """The owner the refusal names (the live holder's, for an acquire)."""
        return self.owner

    @property
    def data(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "owner": self.owner,
            "epoch": self.epoch,
            "retryAfterMs": self.retry_after_ms,
        }


class LeaseRunMismatchError(LeaseHeldError):
    """F2: the presented lease guards another run than the one being changed.

    A ``LeaseHeldError`` as F2 requires, but not retryable: the same call with
    the same lease is refused every time; the caller passed the wrong lease.
    """

    retryable = False


class RunMovedError(LeaseHeldError):
    """The run was moved to another store; its lease here is a tombstone (V4).

    ``rulvar runs move`` left a lease row here at an epoch above every owner's,
    held by a reserved owner string that names the destination (its URL without
    a password) and that never expires. Acquiring again can never succeed here:
    open ``destination`` and acquire there. Not retryable.
    """

    code = "run_moved"
    retryable = False

    def __init__(
        self,
        message: str,
        run_id: str | None = None,
        owner: str | None = None,
        epoch: int | None = None,
        destination: str | None = None,
    ) -> None:
        # Past LeaseHeldError's __init__: every argument must reach Exception's
        # args, or the error would not pickle with its destination.
        RulvarError.__init__(self, message, run_id, owner, epoch, destination)
        self.run_id = run_id
        self.owner = owner
        self.epoch = epoch
        self.retry_after_ms = None  # never: the run lives elsewhere now
        self.destination = destination

    @property
    def data(self) -> dict[str, Any]:
        return {**super().data, "destination": self.destination}


LostReason = Literal["refused", "expired", "failed"]


class LeaseLostError(LeaseHeldError):
    """L10: a holder's own lease is gone; the work it guards must stop now.

    Raised by a hold (a LangGraph saver's ``hold``, ``LeaseKeeper``) instead of
    letting the work run on: ``reason`` is ``"refused"`` when a renewal was
    refused (the run was taken over, released or deleted) and ``"expired"``
    when no renewal succeeded before the lease's expiry (the store was
    unreachable, or the process was paused past the ttl); ``"failed"`` when a
    renewal raised an error that retrying cannot cure (the store was closed
    under the hold, or a non-retryable error: ``__cause__`` holds it).
    ``owner`` and ``epoch`` are the lost lease's. Retryable: requeue the work;
    a later acquire resumes it from what was stored.
    """

    code = "lease_lost"

    def __init__(
        self,
        message: str,
        run_id: str | None = None,
        owner: str | None = None,
        epoch: int | None = None,
        reason: LostReason = "refused",
    ) -> None:
        super().__init__(message, run_id, owner, epoch, None, reason)
        # The base passed our arguments on with its own retry_after_ms slot
        # between: keep exactly ours, so the instance pickles with its fields.
        self.args = (message, run_id, owner, epoch, reason)
        self.reason: LostReason = reason

    @property
    def data(self) -> dict[str, Any]:
        return {**super().data, "reason": self.reason}


class CopyConflictError(ContractError):
    """A copy's destination already holds a different run under the same id (V6).

    Its journal is not a prefix of the source's, or its meta or blobs differ in
    a way a resumed copy cannot explain. Nothing was written; not retryable.
    """

    code = "copy_conflict"

    def __init__(self, message: str, run_id: str | None = None) -> None:
        super().__init__(message, run_id)
        self.run_id = run_id

    @property
    def data(self) -> dict[str, Any]:
        return {"runId": self.run_id}


class ArchiveError(ContractError):
    """A run archive is damaged (a checksum, a line) or of an unknown version (V10).

    The import checks the whole file before writing: nothing was imported.
    """

    code = "archive"


class SupersededError(RulvarError):
    """The settle append bounced off the fence: a successor owns the run (A9)."""

    code = "superseded"

    def __init__(self, message: str, run_id: str, run_status: str) -> None:
        super().__init__(message, run_id, run_status)
        self.run_id = run_id
        self.run_status = run_status

    @property
    def data(self) -> dict[str, Any]:
        return {"runId": self.run_id, "runStatus": self.run_status}


class SettlementError(RulvarError):
    """The settle append or terminal meta write failed for a non-fencing reason."""

    code = "settlement"
    retryable = True

    def __init__(
        self, message: str, run_id: str, run_status: str, stage: SettlementStage
    ) -> None:
        super().__init__(message, run_id, run_status, stage)
        self.run_id = run_id
        self.run_status = run_status
        self.stage: SettlementStage = stage

    @property
    def data(self) -> dict[str, Any]:
        return {"runId": self.run_id, "runStatus": self.run_status, "stage": self.stage}


class StoreBusyError(RulvarError):
    """Backend contention outlasted its bound; nothing was written, retry later."""

    code = "store_busy"
    retryable = True

    def __init__(self, message: str, operation: str | None = None) -> None:
        super().__init__(message, operation)
        self.operation = operation

    @property
    def data(self) -> dict[str, Any]:
        return {"operation": self.operation}


class StoreUnavailableError(RulvarError):
    """The backend could not be reached or dropped the connection mid-call.

    The outcome of an in-flight commit is unknown unless the message says otherwise.
    """

    code = "store_unavailable"
    retryable = True

    def __init__(self, message: str, operation: str | None = None) -> None:
        super().__init__(message, operation)
        self.operation = operation

    @property
    def data(self) -> dict[str, Any]:
        return {"operation": self.operation}


class ConfigError(RulvarError):
    """A URL, option, schema version or capability claim is wrong; fix the setup."""

    code = "config"


class MissingExtraError(ConfigError, ModuleNotFoundError):
    """A module of this distribution needs a driver its install lacks.

    Raised on importing a store class (``from rulvar_store_sqlite import
    SqliteStore``) or opening a URL whose backend's extra is missing. The
    message names the extra to install. A ``ConfigError`` (fix the setup, exit 2
    in the CLI) and a ``ModuleNotFoundError``, so ``except ImportError`` around
    an optional import still catches it. ``name`` is the missing module.
    """

    code = "config"

    def __init__(self, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name
