"""The savers' calls counted and traced like store calls (``rulvar_store`` telemetry).

A span per checkpoint operation, named ``"<method> checkpoint"`` with the
store's database attributes and the thread under ``rulvar.run.id`` (hashed by
default: ``configure_telemetry``); the store calls it makes nest under it.
``stats()`` and the counters ``rulvar.langgraph.<name>`` count calls, errors,
checkpoints and pending writes stored; a refused write counts under the fence
surface ``checkpoint``. Counters carry no thread (one series per thread would
grow without bound); the spans do.

``list``/``alist`` are generators: their store calls are traced one by one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sized
from contextvars import ContextVar
from typing import Any, Final

from rulvar_store.backend import (
    CallKind,
    TelemetryTarget,
    argument,
    instrument_calls,
    telemetry_target,
)

__all__ = ["ASYNC_SAVER_CALLS", "SAVER_CALLS", "saver_target", "traced_saver"]

CHECKPOINTS: Final = "checkpoints"
WRITES: Final = "writes"

_SAVER_CALL: Final[ContextVar[bool]] = ContextVar("rulvar_saver_call", default=False)


def _thread(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    config = argument(0, "config")(args, kwargs)
    configurable = config.get("configurable") if isinstance(config, dict) else None
    thread = configurable.get("thread_id") if isinstance(configurable, dict) else None
    return None if thread is None else str(thread)


def _thread_named(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    thread = argument(0, "thread_id")(args, kwargs)
    return thread if isinstance(thread, str) else None


def _one_checkpoint(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Mapping[str, int]:
    return {CHECKPOINTS: 1}


def _writes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Mapping[str, int]:
    writes = argument(1, "writes")(args, kwargs)
    return {WRITES: len(writes) if isinstance(writes, Sized) else 0}


def _kinds(prefix: str) -> dict[str, CallKind]:
    kinds = (
        CallKind("put", "checkpoint", "checkpoint", _thread, tally=_one_checkpoint),
        CallKind("put_writes", "checkpoint", "checkpoint", _thread, tally=_writes),
        CallKind("get_tuple", "checkpoint", None, _thread),
        CallKind("delete_thread", "checkpoint", "checkpoint", _thread_named),
        CallKind("copy_thread", "checkpoint", "checkpoint", _thread_named),
        CallKind("prune", "checkpoint", "checkpoint", _thread_named),
    )
    return {prefix + kind.name: kind for kind in kinds}


SAVER_CALLS: Final = {**_kinds(""), **_kinds("a")}
"""``RulvarSaver``: its sync methods, and the async twins (which run them on a
thread, so a call is traced once)."""

ASYNC_SAVER_CALLS: Final = _kinds("a")
"""``AsyncRulvarSaver``: the coroutines (its sync methods only call into them)."""


def saver_target(saver: Any) -> TelemetryTarget:
    """The database the saver's store is, as that store reports it."""
    return telemetry_target(saver.journal) or TelemetryTarget("rulvar.other")


def traced_saver(kinds: Mapping[str, CallKind]) -> Any:
    """The class decorator instrumenting a saver's ``kinds``."""
    return instrument_calls(saver_target, kinds, _SAVER_CALL, scope="langgraph")
