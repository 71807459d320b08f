"""Processes of the move-under-load test: a writer of its own run, or a zombie.

    python _load_worker.py writer URL RUN STOPFILE   appends until STOPFILE exists
    python _load_worker.py zombie SRC DST RUN        holds RUN, says "ready", waits
                                                     for a line on stdin, then tries
                                                     every write it could

Each prints one JSON line with what happened at the end.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from rulvar_store import Lease, open_store
from rulvar_store.errors import LeaseHeldError, RulvarError


def writer(url: str, run_id: str, stop_file: str) -> None:
    accepted, errors = 0, []
    with open_store(url) as store:
        journal: Any = store.journal
        lease = journal.acquire(run_id, f"writer-{os.getpid()}")
        renewed = time.monotonic()
        while not os.path.exists(stop_file):
            try:
                journal.append(run_id, {"seq": accepted + 1, "kind": "w"}, lease)
                accepted += 1
            except RulvarError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
            if time.monotonic() - renewed > 0.3:
                journal.renew(lease)
                renewed = time.monotonic()
            time.sleep(0.005)
        journal.release(lease)
    print(json.dumps({"accepted": accepted, "errors": errors}), flush=True)


def _attempt(call: object) -> str:
    try:
        call()  # type: ignore[operator]
    except LeaseHeldError as exc:
        return type(exc).__name__ + ":" + str(getattr(exc, "destination", ""))
    return "accepted"


def zombie(src_url: str, dst_url: str, run_id: str) -> None:
    with open_store(src_url) as source:
        src: Any = source.journal
        lease = src.acquire(run_id, "zombie")
        src.append(run_id, {"seq": 2**72, "kind": "zombie-before"}, lease)
        print("ready", flush=True)
        sys.stdin.readline()  # SIGSTOPped here while the run moves
        results = {
            "source_append": _attempt(
                lambda: src.append(run_id, {"seq": 2**73, "kind": "z"}, lease)
            ),
            "source_meta": _attempt(
                lambda: src.put_meta({"runId": run_id, "status": "ok"}, lease)
            ),
            "source_renew": _attempt(lambda: src.renew(lease)),
            "source_acquire": _attempt(lambda: src.acquire(run_id, "zombie")),
        }
        with open_store(dst_url) as destination:
            dst: Any = destination.journal
            same = Lease(run_id, lease.owner, lease.epoch)
            results["destination_append"] = _attempt(
                lambda: dst.append(run_id, {"seq": 2**74, "kind": "z"}, same)
            )
            results["destination_blob"] = _attempt(
                lambda: destination.transcripts.put(f"{run_id}/z", b"z", same)
            )
            results["destination_renew"] = _attempt(lambda: dst.renew(same))
    print(json.dumps(results), flush=True)


if __name__ == "__main__":
    role, *rest = sys.argv[1:]
    if role == "writer":
        writer(*rest)
    else:
        zombie(*rest)
