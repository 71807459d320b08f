"""Every store call counted; traced and measured too when OpenTelemetry is installed.

``instrumented(...)`` wraps a class's methods, sync or ``async def``, as the
``CallKind`` table of its role says (``_call_kinds``). Each call then:

- moves the counters an operator watches (``_store_stats``): stale writes
  refused by surface, leases acquired / lost / released, busy timeouts,
  unavailable errors, unknown outcomes. ``stats()`` (from ``Observed``) returns
  them as a plain dict, with no dependency;
- when the OpenTelemetry API is importable (extra ``rulvar-stores[otel]``),
  records ``db.client.operation.duration`` and the counters as OpenTelemetry
  metrics and opens a span (``_otel``). The API is a no-op until the
  application installs an SDK, and while none is installed no span is started
  and no attribute built: the call pays one look at the global providers.

Without the package nothing imports it. A call made inside another instrumented
call (an async store running its sync twin's read, a saver calling its store)
is counted by each object for itself but traced and timed once per object
kind: a context variable marks a store call in progress, and it follows the
call onto worker threads; a saver's calls set their own.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import inspect
import threading
import weakref
from collections.abc import Callable, Mapping
from contextlib import suppress
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

from rulvar_store._call_kinds import BLOB_CALLS, JOURNAL_CALLS, CallKind
from rulvar_store._store_stats import StoreStats, merge_stats
from rulvar_store.errors import (
    LeaseHeldError,
    LeaseRunMismatchError,
    StoreBusyError,
    StoreUnavailableError,
)

__all__ = [
    "Observed",
    "RunIdPolicy",
    "TelemetryTarget",
    "batch_recorder",
    "configure_telemetry",
    "instrument_calls",
    "instrumented",
    "note",
    "process_stats",
    "shown_run_id",
    "stats_of",
    "telemetry_target",
]

C = TypeVar("C", bound=type)
RunIdPolicy = Literal["hash", "omit", "plain"]

_ATTRIBUTE: Final = "_rulvar_telemetry"
_STORE_CALL: Final[ContextVar[bool]] = ContextVar("rulvar_store_call", default=False)


@dataclass(frozen=True, slots=True)
class TelemetryTarget:
    """What a store says about itself on every span and metric point.

    ``system`` is ``db.system.name`` (``sqlite``, ``postgresql``, or
    ``rulvar.memory`` / ``rulvar.file`` for the stores that are no database);
    ``namespace`` is ``db.namespace`` (a file path, ``database|schema``);
    ``address`` and ``port`` the server's. Never a credential.
    """

    system: str
    namespace: str | None = None
    address: str | None = None
    port: int | None = None


@dataclass(slots=True)
class _Settings:
    run_ids: RunIdPolicy = "hash"


_SETTINGS: Final = _Settings()


def configure_telemetry(*, run_ids: RunIdPolicy = "hash") -> None:
    """Choose how spans and saver counters name a run or thread: ``"hash"``
    (default: the first 16 hex digits of its SHA-256, the same in every span
    without showing the id), ``"omit"`` or ``"plain"``.

    Raises:
        ValueError: ``run_ids`` is none of the three.
    """
    if run_ids not in ("hash", "omit", "plain"):
        raise ValueError(f"run_ids must be 'hash', 'omit' or 'plain', got {run_ids!r}")
    _SETTINGS.run_ids = run_ids


def shown_run_id(run_id: str) -> str | None:
    """A run or thread id as telemetry may show it (``configure_telemetry``)."""
    policy = _SETTINGS.run_ids
    if policy == "omit":
        return None
    if policy == "plain":
        return run_id
    return hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


# -- OpenTelemetry, loaded once and only if installed ---------------------------------

_OTEL: dict[str, Any] = {}


def _otel() -> Any:
    """The ``_otel`` module when the OpenTelemetry API is installed, else ``None``."""
    if "module" not in _OTEL:
        try:
            present = importlib.util.find_spec("opentelemetry") is not None
        except (ImportError, ValueError):  # blocked in sys.modules, or broken
            present = False
        if present:
            from rulvar_store import _otel

            _OTEL["module"] = _otel
        else:
            _OTEL["module"] = None
    return _OTEL["module"]


class _Telemetry:
    """One object's counters, target attributes and OpenTelemetry handles."""

    __slots__ = ("attributes", "otel", "scope", "stats", "target")

    def __init__(self, target: TelemetryTarget, scope: str = "store") -> None:
        self.target = target
        self.scope = scope
        self.stats = StoreStats()
        self.otel = _otel()
        self.attributes: dict[str, Any] = {"db.system.name": target.system}
        if target.namespace is not None:
            self.attributes["db.namespace"] = target.namespace
        if target.address is not None:
            self.attributes["server.address"] = target.address
        if target.port is not None:
            self.attributes["server.port"] = target.port

    def counted(
        self,
        kind: CallKind,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        error: BaseException | None,
    ) -> None:
        """Count one finished call (OpenTelemetry reads the counts when it collects)."""
        if error is None and kind.tally is None:
            # The common case: only the call's own counters, no lock taken.
            self.stats.tick(_SUCCESS.get(kind.name, _CALL))
            return
        stats = self.stats
        for counter, surface, amount in _events(kind, error):
            if surface is None:
                stats.add(counter, amount)
            else:
                stats.refused(surface)
        if error is None and kind.tally is not None:
            for counter, amount in kind.tally(args, kwargs).items():
                stats.add(counter, amount)


_CALL: Final = ("calls",)
_SUCCESS: Final = {
    "acquire": ("calls", "leases_acquired"),
    "release": ("calls", "leases_released"),
}


def _events(
    kind: CallKind, error: BaseException | None
) -> list[tuple[str, str | None, int]]:
    """The counters one call moves: ``(counter, fence surface or None, amount)``."""
    events: list[tuple[str, str | None, int]] = [("calls", None, 1)]
    if error is None:
        if kind.name == "acquire":
            events.append(("leases_acquired", None, 1))
        elif kind.name == "release":
            events.append(("leases_released", None, 1))
        return events
    events.append(("errors", None, 1))
    if isinstance(error, LeaseHeldError) and not isinstance(
        error, LeaseRunMismatchError
    ):
        if kind.name == "renew":
            events.append(("leases_lost", None, 1))
        if kind.surface is not None:
            events.append(("stale_writes_refused", kind.surface, 1))
    elif isinstance(error, StoreBusyError):
        events.append(("busy_timeouts", None, 1))
    elif isinstance(error, StoreUnavailableError):
        events.append(("unavailable_errors", None, 1))
        if kind.writes:
            events.append(("unknown_outcomes", None, 1))
    return events


Target = tuple[str, tuple[tuple[str, Any], ...]]
"""A counted object's kind (``store``, ``langgraph``) and its attributes, sorted."""


class _Process:
    """Every counted object's figures in this process, by what they describe: the
    live objects, and the sums of those already collected (added when their
    object is), so totals never go back."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.live: set[_Telemetry] = set()
        self.retired: dict[Target, dict[str, Any]] = {}

    def track(self, owner: object, tel: _Telemetry) -> None:
        with self.lock:
            self.live.add(tel)
        weakref.finalize(owner, self.retire, tel)

    def retire(self, tel: _Telemetry) -> None:
        snapshot = tel.stats.snapshot()
        key = _target_key(tel)
        with self.lock:
            self.live.discard(tel)
            earlier = self.retired.get(key)
            self.retired[key] = (
                snapshot if earlier is None else merge_stats([earlier, snapshot])
            )

    def by_target(self) -> dict[Target, dict[str, Any]]:
        """The figures summed per kind and attributes (what metrics report)."""
        with self.lock:
            parts = list(self.retired.items())
            parts += [(_target_key(tel), tel.stats.snapshot()) for tel in self.live]
        summed: dict[Target, list[dict[str, Any]]] = {}
        for key, snapshot in parts:
            summed.setdefault(key, []).append(snapshot)
        return {key: merge_stats(snapshots) for key, snapshots in summed.items()}

    def totals(self) -> dict[str, Any]:
        """The stores' figures, all added up (savers' left out: their calls are
        the stores' calls again)."""
        return merge_stats(
            figures for key, figures in self.by_target().items() if key[0] == "store"
        )


def _target_key(tel: _Telemetry) -> Target:
    return tel.scope, tuple(sorted(tel.attributes.items()))


_PROCESS: Final = _Process()


def process_stats() -> dict[str, Any]:
    """The counters of every store object this process has called, added up
    (those closed and collected included): a kit run's or a job's figures."""
    return _PROCESS.totals()


def _telemetry(
    owner: Any, describe: Callable[[Any], TelemetryTarget], scope: str = "store"
) -> _Telemetry:
    found: _Telemetry | None = owner.__dict__.get(_ATTRIBUTE)
    if found is None:
        found = _Telemetry(describe(owner), scope)
        owner.__dict__[_ATTRIBUTE] = found
        _PROCESS.track(owner, found)
        if found.otel is not None:
            found.otel.observe_counters(_PROCESS.by_target)
            if hasattr(owner, "_telemetry_figures"):
                found.otel.watch_pool(owner, found.attributes)
    return found


def _found(owner: object) -> _Telemetry | None:
    found: _Telemetry | None = getattr(owner, "__dict__", {}).get(_ATTRIBUTE)
    return found


def telemetry_target(store: object) -> TelemetryTarget | None:
    """What an instrumented store (or the sync store an adapter drives) says
    about itself; ``None`` for a store that is not instrumented."""
    for candidate in (store, getattr(store, "sync_store", None)):
        describe = getattr(type(candidate), "_rulvar_describe", None)
        if describe is not None:
            found = _found(candidate)
            return found.target if found is not None else describe(candidate)
    return None


def stats_of(*owners: object) -> dict[str, Any]:
    """The counters of the given objects, added up (those never called count 0)."""
    return merge_stats(
        found.stats.snapshot() for owner in owners if (found := _found(owner))
    )


def note(owner: object, counter: str, amount: int = 1) -> None:
    """Count an event a backend sees inside a call (a takeover, a batch)."""
    found = _found(owner)
    if found is not None:
        found.stats.add(counter, amount)


def batch_recorder(owner: object) -> Callable[[int], None] | None:
    """Where a store reports each group commit's size (the histogram
    ``rulvar.store.group_commit.size``); ``None`` without OpenTelemetry."""
    if _otel() is None:
        return None

    def record(size: int) -> None:
        found = _found(owner)
        if found is not None and found.otel is not None:
            found.otel.batch(size, found.attributes)

    return record


# -- the wrappers ---------------------------------------------------------------------


def _sync_wrapper(
    fn: Callable[..., Any],
    kind: CallKind,
    describe: Callable[[Any], TelemetryTarget],
    marker: ContextVar[bool],
    scope: str,
) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if marker.get():
            return fn(self, *args, **kwargs)
        tel = self.__dict__.get(_ATTRIBUTE) or _telemetry(self, describe, scope)
        token = marker.set(True)
        span = None if tel.otel is None else tel.otel.begin(tel, kind, args, kwargs)
        try:
            result = fn(self, *args, **kwargs)
        except BaseException as exc:
            tel.counted(kind, args, kwargs, exc)
            if span is not None:
                span.end(None, exc)
            raise
        finally:
            marker.reset(token)
        tel.counted(kind, args, kwargs, None)
        if span is not None:
            span.end(result, None)
        return result

    return call


def _async_wrapper(
    fn: Callable[..., Any],
    kind: CallKind,
    describe: Callable[[Any], TelemetryTarget],
    marker: ContextVar[bool],
    scope: str,
) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if marker.get():
            return await fn(self, *args, **kwargs)
        tel = self.__dict__.get(_ATTRIBUTE) or _telemetry(self, describe, scope)
        token = marker.set(True)
        span = None if tel.otel is None else tel.otel.begin(tel, kind, args, kwargs)
        try:
            result = await fn(self, *args, **kwargs)
        except BaseException as exc:
            tel.counted(kind, args, kwargs, exc)
            if span is not None:
                span.end(None, exc)
            raise
        finally:
            # A coroutine closed outside its task (a task destroyed pending when
            # its loop closed) ends in another context, where the token is not
            # valid; the task's own context is gone with it.
            with suppress(ValueError):
                marker.reset(token)
        tel.counted(kind, args, kwargs, None)
        if span is not None:
            span.end(result, None)
        return result

    return call


def instrument_calls(
    describe: Callable[[Any], TelemetryTarget],
    kinds: Mapping[str, CallKind],
    marker: ContextVar[bool] | None = None,
    scope: str = "store",
) -> Callable[[C], C]:
    """Wrap each method ``kinds`` names that the class defines or inherits.

    ``marker`` tells calls nested in one already counted (default: store calls);
    an object kind that calls stores (a saver) passes a marker of its own, and
    the ``scope`` its metrics are named under (``rulvar.<scope>.<counter>``).
    """
    flag = _STORE_CALL if marker is None else marker

    def decorate(cls: C) -> C:
        for name, kind in kinds.items():
            fn = getattr(cls, name, None)
            if fn is None or getattr(fn, "__rulvar_instrumented__", False):
                continue
            wrap = _async_wrapper if inspect.iscoroutinefunction(fn) else _sync_wrapper
            wrapper = wrap(fn, kind, describe, flag, scope)
            wrapper.__rulvar_instrumented__ = True  # type: ignore[attr-defined]  # a marker on the function
            setattr(cls, name, wrapper)
        cls._rulvar_describe = staticmethod(describe)  # type: ignore[attr-defined]  # read by telemetry_target
        return cls

    return decorate


def instrumented(
    describe: Callable[[Any], TelemetryTarget], *, role: Literal["journal", "blobs"]
) -> Callable[[C], C]:
    """Instrument a store class's SPI methods of ``role``."""
    return instrument_calls(
        describe, JOURNAL_CALLS if role == "journal" else BLOB_CALLS
    )


def _related(store: object) -> list[object]:
    """The objects whose calls count as this store's: its blob twin and the sync
    store an async one drives (and theirs), each once."""
    found: list[object] = []
    pending = [store]
    while pending:
        current = pending.pop()
        for name in ("_twin", "sync_store"):
            other = getattr(current, name, None)
            if other is not None and other is not store and other not in found:
                found.append(other)
                pending.append(other)
    return found


class Observed:
    """Gives a store ``stats()``; ``instrumented`` counts what it reports."""

    def stats(self) -> dict[str, Any]:
        """This store's counters as a plain dict: calls, errors, stale writes refused
        (in all and by surface), leases acquired / taken over / lost / released,
        busy retries and timeouts, unavailable errors, unknown outcomes,
        group-commit batches and their operations, and the backend's own figures
        (a PostgreSQL pool's). A journal's figures include its blob twin's."""
        related = _related(self)
        figures = stats_of(self, *related)
        # Figures a backend keeps itself (one door, one pool) are shared by the
        # journal, its twin and an async wrapper: read once, not added up.
        for part in (self, *related):
            extra: Callable[[], dict[str, Any]] | None = getattr(
                part, "_telemetry_figures", None
            )
            if extra is not None:
                figures.update(extra())
        return figures
