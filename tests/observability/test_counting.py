"""Counting without an SDK, tracing once one records, and the switch between them.

Each store call moves ``stats()["calls"]`` by exactly one on every backend, sync
and async, whichever wrappers the classes carry: the counting ones while no
OpenTelemetry SDK records, the tracing ones once one does, including an SDK
configured after the store opened and served calls (``count_probe.py``, a child
process per case: an SDK's providers are set once per process).
"""

from __future__ import annotations

import inspect
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rulvar_store.backend import (
    CallKind,
    Observed,
    TelemetryTarget,
    argument,
    instrument_calls,
    uncounted,
)
from rulvar_store.ops import COUNTER_NAMES
from tests._postgres_gate import postgres_url

PROBE = Path(__file__).with_name("count_probe.py")


def probe(url: str, mode: str, sdk: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "OTEL_SDK_DISABLED"}
    done = subprocess.run(
        [sys.executable, str(PROBE), url, mode, sdk],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.fixture(params=["memory", "file", "sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    name = request.param
    if name == "memory":
        yield "memory://"
    elif name == "file":
        yield f"file://{tmp_path}/files"
    elif name == "sqlite":
        yield f"sqlite:///{tmp_path}/runs.db"
    else:
        import psycopg

        base = postgres_url()
        schema = f"rulvar_count_{secrets.token_hex(5)}"
        yield f"{base}?schema={schema}"
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _calls(found: dict[str, Any]) -> dict[str, dict[str, int]]:
    return {name: moved for name, moved in found.items() if isinstance(moved, dict)}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_without_an_sdk_every_call_is_counted_once_and_none_traced(
    url: str, mode: str
) -> None:
    found = probe(url, mode, "none")
    assert found["warm-up spans"] == 0
    calls = _calls(found)
    assert {"append", "load", "put", "get_under"} <= set(calls)
    assert {name: moved["calls"] for name, moved in calls.items()} == dict.fromkeys(
        calls, 1
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_with_an_sdk_every_call_is_counted_once_and_traced_once(
    url: str, mode: str
) -> None:
    found = probe(url, mode, "sdk")
    assert found["warm-up spans"] == 1  # the first call of the process, traced
    calls = _calls(found)
    assert {
        name: (moved["calls"], moved["spans"]) for name, moved in calls.items()
    } == (dict.fromkeys(calls, (1, 1)))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_sdk_configured_after_the_store_opened_traces_from_the_next_call(
    url: str, mode: str
) -> None:
    found = probe(url, mode, "late")
    assert found["warm-up spans"] == 0  # no SDK yet: counted only
    calls = _calls(found)
    assert {
        name: (moved["calls"], moved["spans"]) for name, moved in calls.items()
    } == (dict.fromkeys(calls, (1, 1)))


# -- the generated counting wrappers pass every kind of argument on ----------------------


def _target(owner: object) -> TelemetryTarget:
    return TelemetryTarget("rulvar.test")


_KINDS = {
    name: CallKind(name, "toy", None, argument(0, "run_id"))
    for name in ("plain", "positional", "starred", "keywords")
}


@instrument_calls(_target, _KINDS)
class _Toy(Observed):
    def plain(self, run_id: str, entry: Any = None, lease: Any = None) -> Any:
        return (run_id, entry, lease)

    def positional(self, run_id: str, /, count: int = 2) -> Any:
        return (run_id, count)

    def starred(self, run_id: str, *more: Any, flag: bool = False) -> Any:
        return (run_id, more, flag)

    def keywords(self, run_id: str, *, limit: int, **options: Any) -> Any:
        if limit < 0:
            raise ValueError("limit below 0")
        return (run_id, limit, options)


def test_counting_wrappers_keep_each_methods_signature_and_arguments() -> None:
    toy = _Toy()
    assert toy.plain("r") == ("r", None, None)
    assert toy.plain("r", lease=3, entry=2) == ("r", 2, 3)
    assert toy.positional("r") == ("r", 2)
    assert toy.positional("r", 5) == ("r", 5)
    assert toy.starred("r", 1, 2, flag=True) == ("r", (1, 2), True)
    assert toy.keywords("r", limit=1, a=2) == ("r", 1, {"a": 2})
    with pytest.raises(ValueError, match="limit below 0"):
        toy.keywords("r", limit=-1)
    with pytest.raises(TypeError):
        toy.positional(run_id="r")  # type: ignore[call-arg]  # positional-only, as written
    for name in _KINDS:
        raw = uncounted(_Toy, name)
        assert inspect.signature(getattr(_Toy, name)) == inspect.signature(raw)
        assert getattr(_Toy, name).__wrapped__ is raw
    counted = toy.stats()
    assert set(COUNTER_NAMES) <= set(counted)
    assert counted["calls"] == 7  # the raising call included
    assert counted["errors"] == 1
