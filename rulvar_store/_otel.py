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

Until the application installs an SDK the API is a no-op; here a call then
starts no span and builds no attributes: it checks the two global providers.
"""

from __future__ import annotations

import time
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Final

from opentelemetry import context, metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from rulvar_store._call_kinds import CallKind
from rulvar_store._records import Lease
from rulvar_store._store_stats import COUNTER_NAMES
from rulvar_store._telemetry import _Telemetry, shown_run_id
from rulvar_store.errors import LeaseHeldError, StoreUnavailableError

__all__ = ["CallSpan", "batch", "begin", "count"]

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
_counters: dict[str, Any] = {}


def _counter(name: str) -> Any:
    """The counter for ``name``: ``rulvar.store.<name>``, or ``name`` itself when
    dotted (a saver's ``rulvar.langgraph.checkpoints``)."""
    counter = _counters.get(name)
    if counter is None:
        metric = name if "." in name else f"rulvar.store.{name}"
        counter = _meter.create_counter(metric, unit="{event}")
        _counters[name] = counter
    return counter


for _name in COUNTER_NAMES:
    _counter(_name)
_UNSET_PROVIDERS: Final = ("_ProxyMeterProvider", "NoOpMeterProvider")


def _tracing() -> bool:
    provider = trace.get_tracer_provider()
    return not isinstance(
        provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider
    )


def _metering() -> bool:
    # The API names its stand-in provider privately: told apart by class name.
    return type(metrics.get_meter_provider()).__name__ not in _UNSET_PROVIDERS


def count(
    counter: str, amount: int, attributes: dict[str, Any], surface: str | None
) -> None:
    """Add to the counter ``rulvar.store.<counter>`` (a no-op without an SDK)."""
    if surface is not None:
        attributes = {**attributes, "rulvar.fence.surface": surface}
    _counter(counter).add(amount, attributes)


def batch(size: int, attributes: dict[str, Any]) -> None:
    """Record one group commit's size."""
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


class CallSpan:
    """One call in flight: its span (when tracing) and start time (when metering)."""

    __slots__ = (
        "_attributes",
        "_lease",
        "_op",
        "_span",
        "_started",
        "_store_attributes",
        "_token",
    )

    def __init__(
        self,
        tel: _Telemetry,
        op: CallKind,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        tracing: bool,
    ) -> None:
        self._op = op
        self._store_attributes = tel.attributes
        self._attributes = {**tel.attributes, "db.operation.name": op.name}
        lease = op.lease(args, kwargs) if op.lease is not None else None
        self._lease = lease if isinstance(lease, Lease) else None
        self._span: Any = None
        self._token: Any = None
        if tracing:
            attributes: dict[str, Any] = dict(self._attributes)
            run_id = op.run_id(args, kwargs)
            shown = None if run_id is None else shown_run_id(run_id)
            if shown is not None:
                attributes["rulvar.run.id"] = shown
            if self._lease is not None:
                attributes["rulvar.lease.epoch"] = self._lease.epoch
            self._span = _tracer.start_span(
                f"{op.name} {op.target}", kind=SpanKind.CLIENT, attributes=attributes
            )
            # Current while the call runs: a driver's own instrumentation nests here.
            self._token = context.attach(trace.set_span_in_context(self._span))
        self._started = time.perf_counter()

    def count(self, events: list[tuple[str, str | None, int]]) -> None:
        """Add the call's counter moves (``_telemetry._events``) as metrics."""
        attributes = self._store_attributes
        for counter, surface, amount in events:
            count(counter, amount, attributes, surface)

    def end(self, result: Any, error: BaseException | None) -> None:
        """Record the duration and close the span with the call's outcome."""
        elapsed = time.perf_counter() - self._started
        attributes = self._attributes
        if error is not None:
            attributes = {**attributes, "error.type": _error_type(error)}
        _duration.record(elapsed, attributes)
        span = self._span
        if span is None:
            return
        context.detach(self._token)
        if self._op.surface is not None and self._lease is not None:
            span.set_attribute("rulvar.fence.outcome", _fence_outcome(error))
        if isinstance(result, Lease):
            span.set_attribute("rulvar.lease.epoch", result.epoch)
        if error is not None:
            span.set_attribute("error.type", _error_type(error))
            # The class, never the message: a message may name a run or a path.
            span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        span.end()


def begin(
    tel: _Telemetry, op: CallKind, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> CallSpan | None:
    """Start timing (and tracing) one call, or ``None`` while no SDK is installed."""
    tracing = _tracing()
    if not tracing and not _metering():
        return None
    return CallSpan(tel, op, args, kwargs, tracing)
