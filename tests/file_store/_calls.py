"""Every journal and blob call that reaches one run's folder, by name.

The tests that put something wrong where a run folder belongs (a link, a plain
file) need each call to be refused the same way; one table keeps them from
drifting apart when the stores gain a call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rulvar_store import FileTranscriptStore, JsonlFileStore

Call = Callable[[JsonlFileStore, FileTranscriptStore], Any]


def run_folder_calls(run_id: str) -> dict[str, Call]:
    """Each call on ``run_id``, by a short name for the test id.

    The append's seq is 2, above any seq a planted journal holds (1), so an
    append that got through would land rather than hit the order guard.
    """
    return {
        "append": lambda j, b: j.append(run_id, {"seq": 2}),
        "load": lambda j, b: j.load(run_id),
        "load_since": lambda j, b: j.load_since(run_id),
        "put_meta": lambda j, b: j.put_meta({"runId": run_id, "status": "x"}),
        "get_meta": lambda j, b: j.get_meta(run_id),
        "delete": lambda j, b: j.delete(run_id),
        "blob put": lambda j, b: b.put(f"{run_id}/x", b"mine"),
        "blob put run ref": lambda j, b: b.put(run_id, b"mine"),
        "blob get": lambda j, b: b.get(f"{run_id}/x"),
        "blob list": lambda j, b: b.list_refs(run_id),
        "blob delete": lambda j, b: b.delete(f"{run_id}/x"),
    }
