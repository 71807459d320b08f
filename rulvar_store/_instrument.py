"""The wrappers that count (and, while an SDK records, trace) each store call.

Every instrumented method has two wrappers, and its class carries the one the
process needs now (``_telemetry.refresh`` swaps them when that changes):

- **counting** (no OpenTelemetry SDK recording, or no OpenTelemetry at all):
  for a store's sync methods, a function generated with the method's own
  signature (no ``*args`` packing) that calls it inside a ``try`` and moves
  the call's counters: one attribute read and one ``next`` on success, about
  0.1 µs. It does not mark the call in progress: a store never calls its own
  instrumented methods (it calls the functions underneath, ``uncounted``), and
  a sync store whose methods an async one runs (SQLite's) is instrumented
  ``nested``: its counting wrappers pass a marked call through. Coroutines and
  savers keep the marking wrapper below (a hop to a thread or a checkpoint
  dwarfs it);
- **tracing** (an SDK records): the marking wrapper, which also opens a span
  and records the duration histogram (``_otel.begin``). A context variable
  marks a store call in progress and follows it onto worker threads, so a call
  made inside another (a saver's store calls have their own marker) is traced
  and counted once per object kind.
"""

from __future__ import annotations

import functools
import inspect
import linecache
from collections.abc import Callable, Mapping
from contextlib import suppress
from contextvars import ContextVar
from typing import Any, Final, Literal, TypeVar

from rulvar_store._call_kinds import BLOB_CALLS, JOURNAL_CALLS, CallKind
from rulvar_store._telemetry import (
    _ATTRIBUTE,
    _STORE_CALL,
    TelemetryTarget,
    _telemetry,
    recording,
    register_wrappers,
)

__all__ = ["instrument_calls", "instrumented", "uncounted"]

C = TypeVar("C", bound=type)

_RAW = "__rulvar_raw__"
"""The class attribute holding each instrumented method's own function."""


def uncounted(cls: type, name: str) -> Callable[..., Any]:
    """``cls``'s method ``name`` as written, without the telemetry wrapper: what
    a store calls when one of its calls runs another (counted once, by the outer)."""
    raw: dict[str, Callable[..., Any]] = getattr(cls, _RAW)
    return raw[name]


# -- counting: generated with the method's own signature --------------------------------


def _signature_text(fn: Callable[..., Any]) -> tuple[str, str, dict[str, Any]]:
    """The parameter list (after ``self``) and the call passing them on, as
    source, with the defaults they name."""
    params = list(inspect.signature(fn).parameters.values())[1:]
    defaults: dict[str, Any] = {}
    declared: list[str] = []
    passed: list[str] = []
    keyword_only_open = False
    for index, param in enumerate(params):
        text = param.name
        if param.default is not inspect.Parameter.empty:
            key = f"__rv_default_{index}"
            defaults[key] = param.default
            text += f"={key}"
        if param.kind is param.VAR_POSITIONAL:
            declared.append("*" + param.name)
            passed.append("*" + param.name)
            keyword_only_open = True
        elif param.kind is param.VAR_KEYWORD:
            declared.append("**" + param.name)
            passed.append("**" + param.name)
        elif param.kind is param.KEYWORD_ONLY:
            if not keyword_only_open:
                declared.append("*")
                keyword_only_open = True
            declared.append(text)
            passed.append(f"{param.name}={param.name}")
        else:
            declared.append(text)
            passed.append(param.name)
            if param.kind is param.POSITIONAL_ONLY and (
                index + 1 == len(params)
                or params[index + 1].kind is not param.POSITIONAL_ONLY
            ):
                declared.append("/")
    return ", ".join(declared), ", ".join(passed), defaults


_COUNTING_SOURCE = """
def {name}(__rv_self{comma}{declared}):
{nested}    try:
        __rv_tel = __rv_self.{attribute}
    except AttributeError:
        __rv_tel = __rv_make(__rv_self)
        if __rv_recording():
            return __rv_traced(__rv_self{comma}{passed})
    try:
        __rv_result = __rv_fn(__rv_self{comma}{passed})
    except BaseException as __rv_error:
        __rv_tel.counted(__rv_kind, (), {{}}, __rv_error)
        raise
{ticks}
    return __rv_result
"""

# The telemetry object's attribute holding each lock-free counter.
_TICK_ATTRIBUTES: Final = {
    "calls": "calls_tick",
    "leases_acquired": "acquired_tick",
    "leases_released": "released_tick",
}


def _counting_wrapper(
    fn: Callable[..., Any],
    kind: CallKind,
    describe: Callable[[Any], TelemetryTarget],
    scope: str,
    traced: Callable[..., Any],
    nested: bool,
) -> Callable[..., Any]:
    """The counting wrapper of ``fn``; ``traced`` (its tracing wrapper) serves
    the object's first call if making its telemetry found a recording SDK.
    With ``nested``, a call made inside another store call is passed through
    uncounted (one look at the marker)."""
    declared, passed, defaults = _signature_text(fn)
    ticks = "\n".join(
        f"    next(__rv_tel.{_TICK_ATTRIBUTES[counter]})" for counter in kind.succeeded
    )
    comma = ", " if declared else ""
    source = _COUNTING_SOURCE.format(
        name=fn.__name__,
        nested=(
            f"    if __rv_marked():\n        return __rv_fn(__rv_self{comma}{passed})\n"
            if nested
            else ""
        ),
        comma=", " if declared else "",
        declared=declared,
        passed=passed,
        attribute=_ATTRIBUTE,
        ticks=ticks,
    )
    namespace: dict[str, Any] = {
        "__rv_fn": fn,
        "__rv_kind": kind,
        "__rv_make": lambda owner: _telemetry(owner, describe, scope),
        "__rv_recording": recording,
        "__rv_marked": _STORE_CALL.get,
        "__rv_traced": traced,
        **defaults,
    }
    # Generated rather than ``*args, **kwargs``: packing and unpacking the
    # arguments costs more than the rest of the wrapper together.
    filename = f"<rulvar counting {fn.__module__}.{fn.__qualname__}>"
    # The source is built above from the method's signature, nothing else.
    exec(compile(source, filename, "exec"), namespace)
    # Tracebacks through the wrapper show its lines.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    wrapper: Callable[..., Any] = functools.wraps(fn)(namespace[fn.__name__])
    return wrapper


# -- marking: coroutines, savers, and every call while an SDK records --------------------


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
    *,
    nested: bool = False,
) -> Callable[[C], C]:
    """Wrap each method ``kinds`` names that the class defines or inherits.

    ``marker`` tells calls nested in one already counted (default: store calls);
    an object kind that calls stores (a saver) passes a marker of its own, and
    the ``scope`` its metrics are named under (``rulvar.<scope>.<counter>``).
    ``nested``: another instrumented object calls these methods inside its own
    calls (an async store running its sync store's reads), so the counting
    wrappers look at the marker too.
    """
    flag = _STORE_CALL if marker is None else marker

    def decorate(cls: C) -> C:
        raw: dict[str, Callable[..., Any]] = dict(getattr(cls, _RAW, {}))
        pairs: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {}
        for name, kind in kinds.items():
            fn = getattr(cls, name, None)
            if fn is None:
                continue
            fn = raw.get(name, getattr(fn, "__wrapped__", fn))
            raw[name] = fn
            if inspect.iscoroutinefunction(fn):
                tracing = _async_wrapper(fn, kind, describe, flag, scope)
                counting = tracing
            else:
                tracing = _sync_wrapper(fn, kind, describe, flag, scope)
                counting = (
                    _counting_wrapper(fn, kind, describe, scope, tracing, nested)
                    if marker is None
                    else tracing
                )
            pairs[name] = (counting, tracing)
        setattr(cls, _RAW, raw)
        cls._rulvar_describe = staticmethod(describe)  # type: ignore[attr-defined]  # read by telemetry_target
        register_wrappers(cls, pairs)
        return cls

    return decorate


def instrumented(
    describe: Callable[[Any], TelemetryTarget],
    *,
    role: Literal["journal", "blobs"],
    nested: bool = False,
) -> Callable[[C], C]:
    """Instrument a store class's SPI methods of ``role`` (``nested``: as
    ``instrument_calls``)."""
    return instrument_calls(
        describe,
        JOURNAL_CALLS if role == "journal" else BLOB_CALLS,
        nested=nested,
    )
