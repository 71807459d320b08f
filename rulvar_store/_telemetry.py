"""Every store call counted; traced and measured too while an OpenTelemetry SDK records.

``_instrument.instrumented(...)`` wraps a class's methods, sync or ``async
def``, as the ``CallKind`` table of its role says (``_call_kinds``). Each call
then:

- moves the counters an operator watches (``_store_stats``): stale writes
  refused by surface, leases acquired / lost / released, busy timeouts,
  unavailable errors, unknown outcomes. ``stats()`` (from ``Observed``) returns
  them as a plain dict, with no dependency;
- while the application has installed an OpenTelemetry SDK that records (extra
  ``rulvar-stores[otel]``), records ``db.client.operation.duration`` and opens
  a span (``_otel``); the counters reach OpenTelemetry when it collects.

Each method has a counting wrapper and a tracing one, and the classes carry
the counting ones until ``refresh`` finds a recording SDK: a call then pays no
look at the providers at all. ``refresh`` runs when an instrumented object is
first used and whenever the OpenTelemetry API sets a global provider (it is
hooked when ``_otel`` loads), so an SDK configured after a store opened is seen
from the next call. Without the package nothing imports it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import itertools
import threading
import weakref
from collections import deque
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, Literal

from rulvar_store._call_kinds import CallKind
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
    "note",
    "process_stats",
    "recording",
    "refresh",
    "register_wrappers",
    "shown_run_id",
    "stats_of",
    "telemetry_target",
]

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
    return _hashed(run_id)


@functools.lru_cache(maxsize=4096)
def _hashed(run_id: str) -> str:
    # Cached: a worker names the same few runs call after call, and the digest
    # costs more than the rest of a span's attributes.
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
    """One object's counters, target attributes and OpenTelemetry handles.

    ``calls_tick``, ``acquired_tick`` and ``released_tick`` are the counters a
    successful call moves, held here so a counting wrapper reaches each in one
    attribute read; ``views`` caches each operation's metric attributes and span
    name.
    """

    __slots__ = (
        "acquired_tick",
        "attributes",
        "calls_tick",
        "otel",
        "released_tick",
        "scope",
        "stats",
        "target",
        "views",
    )

    def __init__(self, target: TelemetryTarget, scope: str = "store") -> None:
        self.target = target
        self.scope = scope
        self.stats = StoreStats()
        ticks = self.stats.ticks
        self.calls_tick: itertools.count[int] = ticks["calls"]
        self.acquired_tick: itertools.count[int] = ticks["leases_acquired"]
        self.released_tick: itertools.count[int] = ticks["leases_released"]
        self.views: dict[str, tuple[dict[str, Any], str]] = {}
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
            self.stats.tick(kind.succeeded)
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


def _events(
    kind: CallKind, error: BaseException | None
) -> list[tuple[str, str | None, int]]:
    """The counters one call moves: ``(counter, fence surface or None, amount)``."""
    if error is None:
        return [(counter, None, 1) for counter in kind.succeeded]
    events: list[tuple[str, str | None, int]] = [
        ("calls", None, 1),
        ("errors", None, 1),
    ]
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
    object is), so totals never go back.

    An object's finalizer only queues its figures (``dying``): the garbage
    collector runs finalizers inside any allocation, in whatever thread
    allocates, so one that took ``lock`` could fire while that very thread held
    it (``by_target`` or ``settle`` allocating) and wait on itself forever.
    ``settle`` moves the queued figures to ``retired`` while no lock is held.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.live: set[_Telemetry] = set()
        self.retired: dict[Target, dict[str, Any]] = {}
        self.dying: deque[_Telemetry] = deque()  # appended without a lock

    def track(self, owner: object, tel: _Telemetry) -> None:
        self.settle()
        with self.lock:
            self.live.add(tel)
        weakref.finalize(owner, self.dying.append, tel)

    def settle(self) -> None:
        """Retire every object whose finalizer ran: its figures join ``retired``."""
        while self.dying:
            try:
                tel = self.dying.popleft()
            except IndexError:  # another thread settled it first
                return
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
        self.settle()
        with self.lock:
            parts = list(self.retired.items())
            live = list(self.live)
        # Snapshots outside the lock: each takes its object's own lock and
        # allocates. A queued object is still in ``live``: counted once, here.
        parts += [(_target_key(tel), tel.stats.snapshot()) for tel in live]
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
            refresh()
    return found


# -- which wrappers the classes carry ------------------------------------------------

Wrappers = dict[str, tuple[Callable[..., Any], Callable[..., Any]]]
"""Per method name: its counting wrapper and its tracing one."""


class _Installed:
    """Every instrumented class's wrappers, and which of them they carry."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.classes: list[tuple[type, Wrappers]] = []
        self.tracing = False


_INSTALLED: Final = _Installed()


def register_wrappers(cls: type, wrappers: Wrappers) -> None:
    """Give ``cls`` the wrappers the process needs now, and keep them for ``refresh``."""
    with _INSTALLED.lock:
        _INSTALLED.classes.append((cls, wrappers))
        _install(cls, wrappers, _INSTALLED.tracing)


def _install(cls: type, wrappers: Wrappers, tracing: bool) -> None:
    for name, (counting, traced) in wrappers.items():
        setattr(cls, name, traced if tracing else counting)


def recording() -> bool:
    """Whether the classes carry the tracing wrappers (an SDK records)."""
    return _INSTALLED.tracing


def refresh() -> None:
    """Swap every instrumented class's wrappers if an SDK started (or stopped)
    recording since the last look. A call in flight ends in the wrapper it began in."""
    module = _otel()
    # Looked at outside the lock: reading a provider may set one (named by an
    # environment variable), which calls ``refresh`` again through the hook.
    tracing = module is not None and module.recording()
    if tracing == _INSTALLED.tracing:
        return
    with _INSTALLED.lock:
        if tracing == _INSTALLED.tracing:
            return
        _INSTALLED.tracing = tracing
        for cls, wrappers in _INSTALLED.classes:
            _install(cls, wrappers, tracing)


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
