"""Exactness edges of the data-edges suite: texts kept as written, runs kept apart.

``exact_text``: a store persists the serialized text (D1, D4, D6), so key order,
the int/float distinction and numbers beyond 64 bits come back exactly as
written; a store that goes through a normalizing type (``jsonb``, a sorted dump,
a float) changes them. ``run_ids_exact``: reads and deletes address exactly one
run id; ids that are prefixes of each other or that contain LIKE wildcards must
never reach each other's entries, metas or blobs, and ``delete`` never touches
blobs (M6, T5).
"""

from __future__ import annotations

import json
from typing import Any, Final

from rulvar_conformance.harness.kit import attempt, require
from rulvar_conformance.harness.probe import describe, shown
from rulvar_store import ContractError, OpenedStore, RunMeta, read_run_meta

__all__ = ["EXACT_VALUE", "exact_text", "run_ids_exact"]

EXACT_VALUE: Final[dict[str, Any]] = {
    "zulu": 1,
    "alpha": {"yankee": [3, {"quebec": 1, "bravo": 2}], "bravo": None},
    "big": 2**64 + 1,
    "negative": -(2**70) - 3,
    "float": 0.1 + 0.2,
    "tiny": 5e-324,
    "negativeZero": -0.0,
    "oneFloat": 1.0,
    "exponent": 1e22,
    "text": "é\u2028\t\"'\\",
    "emptyKey": {"": "", " ": " "},
}
"""Keys out of sorted order at every depth, ints beyond 64 bits, floats that a
normalizing store would rewrite (``1.0``, ``-0.0``), and awkward characters."""


def _text(value: Any) -> str:
    # Order-preserving (no sort_keys): what the store was handed, key for key.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _require_text(observed: Any, expected: Any, what: str) -> None:
    want, got = _text(expected), _text(observed)
    at = next(
        (i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b),
        min(len(want), len(got)),
    )
    start = max(0, at - 30)
    require(
        got == want,
        f"{what}: the JSON text differs from character {at} on: expected "
        f"...{want[start : at + 40]!r}..., observed ...{got[start : at + 40]!r}... "
        "(keys, their order and number types are kept as written, D4)",
    )


def exact_text(writer: OpenedStore, reader: OpenedStore) -> None:
    """Entries and metas come back as the text they were written (D1, D4, D6)."""
    entry = {"seq": 0, "kind": "step", **EXACT_VALUE}
    writer.journal.append("exact", entry)
    meta: RunMeta = {"runId": "exact", "updatedAt": "u", "status": "ok", **EXACT_VALUE}
    writer.journal.put_meta(meta)
    loaded = reader.journal.load("exact")
    require(len(loaded) == 1, f"load: expected 1 entry, observed {len(loaded)}")
    _require_text(loaded[0], entry, "an entry read back")
    _require_text(read_run_meta(reader.journal, "exact"), meta, "a meta read back")
    listed = [m for m in reader.journal.list_runs() if m.get("runId") == "exact"]
    _require_text(listed, [meta], "list_runs() of that meta")


RUN_FAMILIES: Final = (
    ("d-1", "d-10", "d-1x", "d"),  # prefixes of one another
    ("d_x", "dyx", "d_xx"),  # '_' is a one-character LIKE wildcard
    ("d%", "dz", "d%z"),  # '%' matches anything in LIKE (where ids allow it)
    ("d.1", "dq1"),  # '.' matches anything in a regular expression
)
"""Each family's first id is the one deleted; the others must stay untouched."""


def _write_run(opened: OpenedStore, run: str) -> bool:
    """Give ``run`` an entry, a meta and a blob; ``False`` if its id is refused (typed)."""
    first = attempt(lambda: opened.journal.append(run, {"seq": 0, "run": run}))
    if isinstance(first.error, ContractError):
        return False  # ids this store refuses (file stores: T9)
    require(
        first.ok,
        f"append to run {run!r}: expected success, observed {describe(first.error)}",
    )
    opened.journal.append(run, {"seq": 1, "run": run})
    opened.journal.put_meta({"runId": run, "status": "running", "updatedAt": run})
    opened.transcripts.put(f"{run}/blob", run.encode())
    return True


def _require_run(opened: OpenedStore, run: str, present: bool, when: str) -> None:
    entries = opened.journal.load(run)
    expected = [{"seq": 0, "run": run}, {"seq": 1, "run": run}] if present else []
    require(
        _text(entries) == _text(expected),
        f"{when}: load({run!r}) expected {shown(expected)}, observed {shown(entries)}",
    )
    meta = read_run_meta(opened.journal, run)
    want = {"runId": run, "status": "running", "updatedAt": run} if present else None
    require(
        _text(meta) == _text(want),
        f"{when}: the meta of {run!r} expected {shown(want)}, observed {shown(meta)}",
    )
    blob = opened.transcripts.get(f"{run}/blob")
    require(
        blob == run.encode(),
        f"{when}: blob {run + '/blob'!r} expected {run.encode()!r} (delete never "
        f"touches blobs, M6, T5), observed {blob!r}",
    )


def run_ids_exact(writer: OpenedStore, reader: OpenedStore) -> None:
    """Reads and deletes reach exactly their own run id (M6, T5, J5)."""
    families = [
        family
        for family in RUN_FAMILIES
        if all(_write_run(writer, run) for run in family)
    ]
    require(families, "expected the store to accept the run ids of at least one family")
    for family in families:
        for run in family:
            _require_run(reader, run, True, "before any delete")
    for family in families:
        target, *others = family
        writer.journal.delete(target)
        _require_run(reader, target, False, f"after delete({target!r})")
        for run in others:
            _require_run(reader, run, True, f"after delete({target!r})")
