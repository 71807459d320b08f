"""A worker of the worker-life tests: ``python life_worker.py SPEC``.

SPEC is JSON: ``url``, ``options``, ``thread``, ``ttl_ms``, ``mode`` (``sync``
or ``async``), ``owner``, ``reached`` (a file created once the worker is inside
node ``work``), ``go`` (the file that lets ``work`` finish), ``log`` (the
side-effect log the ``refund`` node appends to) and ``result`` (where the
worker writes how its invocation ended: ``ok`` or the error's class and data).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from rulvar_langgraph import AsyncRulvarSaver, RulvarSaver
from rulvar_store import RulvarError
from tests.langgraph.life_graph import life_graph


def _outcome(exc: BaseException | None) -> dict[str, Any]:
    if exc is None:
        return {"ended": "ok"}
    data = exc.data if isinstance(exc, RulvarError) else {}
    return {"ended": type(exc).__name__, "data": data, "at": time.time()}


def run_sync(spec: dict[str, Any]) -> dict[str, Any]:
    options = {**spec["options"], "ttl_ms": spec["ttl_ms"]}
    with RulvarSaver.from_url(spec["url"], owner=spec["owner"], **options) as saver:
        graph = life_graph(saver, spec)
        try:
            with saver.hold(spec["thread"]) as config:
                graph.invoke({"trail": []}, config, durability="sync")
        except Exception as exc:
            return _outcome(exc)
    return _outcome(None)


async def run_async(spec: dict[str, Any]) -> dict[str, Any]:
    options = {**spec["options"], "ttl_ms": spec["ttl_ms"]}
    async with AsyncRulvarSaver.from_url(
        spec["url"], owner=spec["owner"], **options
    ) as saver:
        graph = life_graph(saver, spec)
        try:
            async with saver.hold(spec["thread"]) as config:
                await graph.ainvoke({"trail": []}, config, durability="sync")
        except Exception as exc:
            return _outcome(exc)
    return _outcome(None)


def main(spec_text: str) -> None:
    spec = json.loads(spec_text)
    if spec["mode"] == "async":
        outcome = asyncio.run(run_async(spec))
    else:
        outcome = run_sync(spec)
    Path(spec["result"]).write_text(json.dumps(outcome))


if __name__ == "__main__":
    main(sys.argv[1])
