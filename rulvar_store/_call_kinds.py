"""What each SPI method is, for telemetry: its target, its fence surface, where
its run id and lease sit among the arguments.

A ``CallKind`` is all ``_telemetry`` needs to count, time and trace a call
without knowing the method; other instrumented objects (the LangGraph savers)
describe their own methods the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from rulvar_store._records import Lease

__all__ = ["BLOB_CALLS", "JOURNAL_CALLS", "Arguments", "CallKind", "argument"]

Arguments: TypeAlias = tuple[tuple[Any, ...], dict[str, Any]]
Pick: TypeAlias = Callable[[tuple[Any, ...], dict[str, Any]], Any]


def argument(index: int, name: str) -> Pick:
    """The argument at ``index`` (after ``self``), or passed by ``name``."""

    def pick(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return args[index] if len(args) > index else kwargs.get(name)

    return pick


@dataclass(frozen=True, slots=True)
class CallKind:
    """One instrumented method.

    Attributes:
        name: ``db.operation.name``.
        target: what it works on (``journal``, ``blobs``, ``checkpoint``).
        surface: the fence surface a refused write counts under; ``None`` for
            a call that carries no lease.
        run_id: the run the call is about, from its arguments (or ``None``).
        lease: the presented lease, from its arguments.
        tally: extra counters a successful call moves (a saver's writes).
        succeeded: the lock-free counters (``TICKED``) a successful call moves:
            ``calls``, and the leases it takes and gives back (a brief lease
            does both).
    """

    name: str
    target: str
    surface: str | None
    run_id: Pick
    lease: Pick | None = None
    tally: Callable[[tuple[Any, ...], dict[str, Any]], Mapping[str, int]] | None = None
    succeeded: tuple[str, ...] = ("calls",)

    @property
    def writes(self) -> bool:
        """Whether its outcome can be unknown after a lost connection."""
        return self.surface is not None or "leases_acquired" in self.succeeded


def _text(pick: Pick) -> Pick:
    def run_id(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        value = pick(args, kwargs)
        return value if isinstance(value, str) else None

    return run_id


def _run_of_ref(ref: object) -> str | None:
    return ref.split("/", 1)[0] if isinstance(ref, str) else None


def _meta_run(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    meta = argument(0, "meta")(args, kwargs)
    run_id = meta.get("runId") if isinstance(meta, dict) else None
    return run_id if isinstance(run_id, str) else None


def _lease_run(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    lease = argument(0, "lease")(args, kwargs)
    return lease.run_id if isinstance(lease, Lease) else None


def _ref_run(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    return _run_of_ref(argument(0, "ref")(args, kwargs))


def _batch_run(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    items = argument(0, "items")(args, kwargs)
    # Only a list or tuple is looked into: an iterator would be used up here.
    first = items[0] if isinstance(items, list | tuple) and items else None
    return _run_of_ref(first[0]) if isinstance(first, tuple) and first else None


def _brief_put_run(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    return _run_of_ref(argument(1, "ref")(args, kwargs))


def _queued_run(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    return _run_of_ref(getattr(argument(0, "queued")(args, kwargs), "ref", None))


def _queued_lease(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return getattr(argument(0, "queued")(args, kwargs), "lease", None)


def _no_run(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    return None


_RUN = _text(argument(0, "run_id"))
_ACQUIRED: Final = ("calls", "leases_acquired")
_RELEASED: Final = ("calls", "leases_released")
_BRIEF: Final = ("calls", "leases_acquired", "leases_released")


def _table(*kinds: CallKind) -> Mapping[str, CallKind]:
    return {kind.name: kind for kind in kinds}


JOURNAL_CALLS: Final = _table(
    CallKind("append", "journal", "journal", _RUN, argument(2, "lease")),
    CallKind("put_meta", "journal", "meta", _meta_run, argument(1, "lease")),
    CallKind("delete", "journal", "run-delete", _RUN, argument(1, "lease")),
    CallKind("acquire", "journal", None, _RUN, succeeded=_ACQUIRED),
    CallKind("renew", "journal", "lease", _lease_run, argument(0, "lease")),
    CallKind(
        "release",
        "journal",
        "lease",
        _lease_run,
        argument(0, "lease"),
        succeeded=_RELEASED,
    ),
    # The fused calls some stores offer (a LangGraph saver uses them where
    # present): each counts once, with the leases it takes and gives back.
    CallKind("put_with_meta", "journal", "blob", _ref_run, argument(3, "lease")),
    CallKind(
        "put_meta_and_release",
        "journal",
        "meta",
        _meta_run,
        argument(1, "lease"),
        succeeded=_RELEASED,
    ),
    CallKind("acquire_with_last_ref", "journal", None, _RUN, succeeded=_ACQUIRED),
    CallKind("in_brief_lease", "journal", None, _RUN, succeeded=_BRIEF),
    CallKind("brief_put", "journal", None, _brief_put_run, succeeded=_BRIEF),
    CallKind("load", "journal", None, _RUN),
    CallKind("load_since", "journal", None, _RUN),
    CallKind("get_meta", "journal", None, _RUN),
    CallKind("list_runs", "journal", None, _no_run),
    CallKind("meta_page", "journal", None, _no_run),
    CallKind("peek_lease", "journal", None, _RUN),
)
"""The journal SPI (J, M, L clauses) and the operator reads."""

BLOB_CALLS: Final = _table(
    CallKind("put", "blobs", "blob", _ref_run, argument(2, "lease")),
    CallKind("put_many", "blobs", "blob", _batch_run, argument(1, "lease")),
    # A queued put (where a store offers it) counts once, when awaited.
    CallKind("await_put", "blobs", "blob", _queued_run, _queued_lease),
    CallKind("delete", "blobs", "blob-delete", _ref_run, argument(1, "lease")),
    CallKind("get", "blobs", None, _ref_run),
    CallKind("list_refs", "blobs", None, _RUN),
    CallKind("last_ref", "blobs", None, _RUN),
    CallKind("get_under", "blobs", None, _RUN),
)
"""The blob SPI (T clauses)."""
