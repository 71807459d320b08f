"""The OpenTelemetry side of store telemetry, through the API package only.

Imported by ``_telemetry`` only when ``opentelemetry`` is installed. Names and
attributes follow the database semantic conventions: the stable histogram
``db.client.operation.duration`` (seconds, the advised buckets), spans named
``"<db.operation.name> <target>"`` of kind CLIENT with ``db.system.name``,
``db.operation.name``, ``db.namespace``, ``server.address``/``server.port`` and
``error.type``; what the conventions do not cover is under ``rulvar.``: the run
(``rulvar.run.id``, hashed unless configured otherwise), the lease epoch and the
fence's verdict on a fenced write. Counters are ``rulvar.store.<name>`` with the
store's attributes (and ``rulvar.fence.surface`` on refusals).

Until the application installs an SDK the API is a no-op, and no call comes
here: ``recording`` tells ``_telemetry.refresh`` whether the classes are to carry
the tracing wrappers, and the API's provider setters are hooked so that an SDK
installed later is seen from the next call.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Iterable
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Final

from opentelemetry import context, metrics, trace
from opentelemetry.metrics import CallbackOptions, NoOpMeter, Observation
from opentelemetry.trace import SpanKind, Status, StatusCode

from rulvar_store._call_kinds import CallKind
from rulvar_store._records import Lease
from rulvar_store._store_stats import COUNTER_NAMES, REFUSED_BY_SURFACE
from rulvar_store._telemetry import _Telemetry, shown_run_id
from rulvar_store._telemetry import refresh as _telemetry_refresh
from rulvar_store.errors import LeaseHeldError, StoreUnavailableError

__all__ = [
    "SCOPE_COUNTERS",
    "CallSpan",
    "batch",
    "begin",
    "observe_counters",
    "recording",
    "watch_pool",
]

DURATION_BUCKETS_S: Final = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0)
"""The semantic conventions' advised buckets for ``db.client.operation.duration``."""

try:
    _VERSION = version("rulvar-stores")
except PackageNotFoundError:  # run from a source tree that was never installed
    _VERSION = "0"

_tracer = trace.get_tracer("rulvar_store", _VERSION)
_meter = metrics.get_meter("rulvar_store", _VERSION)
_duration = _meter.create_histogram(
    "db.client.operation.duration",
    unit="s",
    description="Duration of rulvar store operations.",
    explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS_S),
)
_batch_sizes = _meter.create_histogram(
    "rulvar.store.group_commit.size",
    unit="{operation}",
    description="Operations committed together by one SQLite group commit.",
    explicit_bucket_boundaries_advisory=[1, 2, 4, 8, 16, 32, 64, 128],
)
SCOPE_COUNTERS: Final = {
    "store": tuple(
        name
        for name in COUNTER_NAMES
        if name
        not in ("busy_retries", "group_commit_batches", "group_commit_operations")
    ),
    "langgraph": ("calls", "errors", "stale_writes_refused", "checkpoints", "writes"),
}
"""The counters reported as ``rulvar.<scope>.<name>``, read from ``stats()`` when
the SDK collects (nothing per call). A SQLite door's batches show in the
histogram ``rulvar.store.group_commit.size``; its busy retries are read from the
live stores (``rulvar.store.busy_retries``)."""

# Where the counted figures come from (``_telemetry._PROCESS.by_target``), set
# by the first counted object.
_source: list[Callable[[], dict[Any, dict[str, Any]]]] = []


def observe_counters(source: Callable[[], dict[Any, dict[str, Any]]]) -> None:
    """Report the counters ``source()`` gives, per kind and attributes (once)."""
    if not _source:
        _source.append(source)


def _observer(
    scope: str, name: str
) -> Callable[[CallbackOptions], Iterable[Observation]]:
    def observe(options: CallbackOptions) -> Iterable[Observation]:
        if not _source:
            return
        for (kind, attributes), figures in _source[0]().items():
            if kind != scope:
                continue
            if name == "stale_writes_refused":
                for surface, count in figures.get(REFUSED_BY_SURFACE, {}).items():
                    yield Observation(
                        count, {**dict(attributes), "rulvar.fence.surface": surface}
                    )
                continue
            value = figures.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                yield Observation(value, dict(attributes))

    return observe


for _scope, _names in SCOPE_COUNTERS.items():
    for _name in _names:
        _meter.create_observable_counter(
            f"rulvar.{_scope}.{_name}",
            callbacks=[_observer(_scope, _name)],
            unit="{event}",
            description=f"rulvar {_scope} {_name.replace('_', ' ')}.",
        )


# Pools reported by observable instruments, held weakly: a closed, dropped store
# stops being observed.
_watched: list[tuple[weakref.ref[Any], dict[str, Any]]] = []


def _pool_figures() -> Iterable[tuple[dict[str, Any], dict[str, Any]]]:
    for ref, attributes in list(_watched):
        owner = ref()
        if owner is None:
            _watched.remove((ref, attributes))
            continue
        pool = owner._telemetry_figures().get("pool")
        if isinstance(pool, dict):
            yield pool, attributes


def _observe_connections(options: CallbackOptions) -> Iterable[Observation]:
    for pool, attributes in _pool_figures():
        size = int(pool.get("pool_size", 0))
        idle = int(pool.get("pool_available", 0))
        yield Observation(idle, {**attributes, "db.client.connection.state": "idle"})
        yield Observation(
            size - idle, {**attributes, "db.client.connection.state": "used"}
        )


def _observe_pending(options: CallbackOptions) -> Iterable[Observation]:
    for pool, attributes in _pool_figures():
        yield Observation(int(pool.get("requests_waiting", 0)), attributes)


def _observe_busy_retries(options: CallbackOptions) -> Iterable[Observation]:
    for ref, attributes in list(_watched):
        owner = ref()
        if owner is not None:
            retries = owner._telemetry_figures().get("busy_retries")
            if isinstance(retries, int):
                yield Observation(retries, attributes)


def _observe_max(options: CallbackOptions) -> Iterable[Observation]:
    for pool, attributes in _pool_figures():
        yield Observation(int(pool.get("pool_max", 0)), attributes)


_meter.create_observable_up_down_counter(
    "db.client.connection.count",
    callbacks=[_observe_connections],
    unit="{connection}",
    description="Connections of the store's pool by state.",
)
_meter.create_observable_up_down_counter(
    "db.client.connection.pending_requests",
    callbacks=[_observe_pending],
    unit="{request}",
    description="Calls waiting for a connection of the store's pool.",
)
_meter.create_observable_up_down_counter(
    "db.client.connection.max",
    callbacks=[_observe_max],
    unit="{connection}",
    description="The store's pool's largest size.",
)


_meter.create_observable_counter(
    "rulvar.store.busy_retries",
    callbacks=[_observe_busy_retries],
    unit="{retry}",
    description="Waits SQLite's busy handler granted, per live store.",
)


def watch_pool(owner: Any, attributes: dict[str, Any]) -> None:
    """Report ``owner``'s pool (``_telemetry_figures()["pool"]``) while it lives."""
    _watched.append((weakref.ref(owner), dict(attributes)))


class _Recording:
    """Whether the application's global providers record: an SDK's tracer
    provider whose tracer is not a no-op, an SDK's meter provider whose meter
    is not (``OTEL_SDK_DISABLED`` makes both no-ops). ``tracer`` is the
    provider's own tracer once tracing (the API's proxy adds a call to each
    span)."""

    __slots__ = ("metering", "tracer", "tracing")

    def __init__(self) -> None:
        self.tracing = False
        self.metering = False
        self.tracer: trace.Tracer = _tracer

    def look(self) -> bool:
        provider = trace.get_tracer_provider()
        unset = trace.ProxyTracerProvider | trace.NoOpTracerProvider
        tracer = (
            None
            if isinstance(provider, unset)
            else provider.get_tracer("rulvar_store", _VERSION)
        )
        self.tracing = tracer is not None and not isinstance(tracer, trace.NoOpTracer)
        if tracer is not None and self.tracing:
            self.tracer = tracer
        meters = metrics.get_meter_provider()
        # The API names its stand-in provider privately: told apart by class name.
        self.metering = type(meters).__name__ not in (
            "_ProxyMeterProvider",
            "NoOpMeterProvider",
        ) and not isinstance(meters.get_meter("rulvar_store", _VERSION), NoOpMeter)
        return self.tracing or self.metering


_recording = _Recording()


def recording() -> bool:
    """Look at the global providers again: whether calls are to be traced or timed."""
    return _recording.look()


def _hook_provider_setters(refresh: Callable[[], None]) -> None:
    """Call ``refresh`` whenever the API sets a global provider.

    The API sets each provider once, through one private function per signal
    (``set_tracer_provider``, the SDK's auto-configuration and the provider
    named by an environment variable all go through it), and tells no one: the
    function is wrapped here. Should a later API rename it, only the late case
    is lost: a provider set before a store is first used is still seen then.
    """
    from opentelemetry.metrics import _internal as metrics_internal

    for module, name in (
        (trace, "_set_tracer_provider"),
        (metrics_internal, "_set_meter_provider"),
    ):
        original = getattr(module, name, None)
        if original is None or getattr(original, "__rulvar_hook__", False):
            continue

        def hooked(
            provider: Any, log: bool, _original: Callable[..., None] = original
        ) -> None:
            _original(provider, log)
            refresh()

        hooked.__rulvar_hook__ = True  # type: ignore[attr-defined]  # a marker on the function
        setattr(module, name, hooked)


_hook_provider_setters(_telemetry_refresh)


def batch(size: int, attributes: dict[str, Any]) -> None:
    """Record one group commit's size (while an SDK meters)."""
    if _recording.metering:
        _batch_sizes.record(size, attributes)


def _error_type(error: BaseException) -> str:
    kind = type(error)
    return f"{kind.__module__}.{kind.__qualname__}"


def _fence_outcome(error: BaseException | None) -> str:
    if error is None:
        return "accepted"
    if isinstance(error, LeaseHeldError):
        return "refused"
    if isinstance(error, StoreUnavailableError):
        return "unknown"
    return "error"


_CLIENT: Final = SpanKind.CLIENT


def _view(tel: _Telemetry, op: CallKind) -> tuple[dict[str, Any], str]:
    """The metric attributes of ``op`` on ``tel``'s object and its span's
    name, built once."""
    found = tel.views.get(op.name)
    if found is None:
        found = tel.views[op.name] = (
            {**tel.attributes, "db.operation.name": op.name},
            f"{op.name} {op.target}",
        )
    return found


class CallSpan:
    """One call in flight: its span (when tracing) and start time."""

    __slots__ = ("_attributes", "_fenced", "_metering", "_span", "_started", "_token")

    def __init__(
        self,
        tel: _Telemetry,
        op: CallKind,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        self._attributes, name = _view(tel, op)
        self._metering = _recording.metering
        self._span: Any = None
        self._fenced = False
        if _recording.tracing:
            attributes: dict[str, Any] = dict(self._attributes)
            run_id = op.run_id(args, kwargs)
            shown = None if run_id is None else shown_run_id(run_id)
            if shown is not None:
                attributes["rulvar.run.id"] = shown
            lease = op.lease(args, kwargs) if op.lease is not None else None
            if isinstance(lease, Lease):
                attributes["rulvar.lease.epoch"] = lease.epoch
                if op.surface is not None:
                    # Set with the others (one call into the span, not two);
                    # a refusal or an unknown outcome overwrites it.
                    attributes["rulvar.fence.outcome"] = "accepted"
                    self._fenced = True
            self._span = _recording.tracer.start_span(
                name, kind=_CLIENT, attributes=attributes
            )
            # Current while the call runs: a driver's own instrumentation, and a
            # saver's store calls, nest here.
            self._token = context.attach(trace.set_span_in_context(self._span))
        self._started = time.perf_counter_ns()

    def end(self, result: Any, error: BaseException | None) -> None:
        """Record the duration and close the span with the call's outcome."""
        elapsed = time.perf_counter_ns() - self._started
        if self._metering:
            attributes = self._attributes
            if error is not None:
                attributes = {**attributes, "error.type": _error_type(error)}
            _duration.record(elapsed / 1e9, attributes)
        span = self._span
        if span is None:
            return
        context.detach(self._token)
        if isinstance(result, Lease):
            span.set_attribute("rulvar.lease.epoch", result.epoch)
        if error is not None:
            failed: dict[str, Any] = {"error.type": _error_type(error)}
            if self._fenced:
                failed["rulvar.fence.outcome"] = _fence_outcome(error)
            span.set_attributes(failed)
            # The class, never the message: a message may name a run or a path.
            span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        span.end()


def begin(
    tel: _Telemetry, op: CallKind, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> CallSpan | None:
    """Start timing (and tracing) one call, or ``None`` while no SDK records."""
    if not (_recording.tracing or _recording.metering):
        return None
    return CallSpan(tel, op, args, kwargs)
