"""The bad arguments of the argument rules (docs/reference/data-rules.md, "Identifiers and values"), as data.

One table per rule: the argument-rules suite drives them through a store's own
API, and the core's intake tests through every built-in backend, so both hold
stores to the same cases. Sizes past the record and blob bounds are left to the
core's tests: a store that ignored them would make the kit write 64 MiB.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any, Final

from rulvar_store import Lease, RunFilter
from rulvar_store.backend import MAX_DEPTH, MAX_REF_LENGTH, MAX_RUN_ID_LENGTH

__all__ = [
    "BAD_BLOBS",
    "BAD_FILTERS",
    "BAD_LEASES",
    "BAD_OWNERS",
    "BAD_READ_REFS",
    "BAD_READ_RUN_IDS",
    "BAD_WRITE_REFS",
    "BAD_WRITE_RUN_IDS",
    "GOOD_REF",
    "GOOD_RUN",
    "NOT_DICT_RECORDS",
    "NOT_JSON_VALUES",
    "nested",
]

GOOD_RUN: Final = "good-run"
GOOD_REF: Final = "good-run/blob"


def nested(depth: int) -> dict[str, Any]:
    """A dict nested ``depth`` levels deep."""
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"v": value}
    return value


def _cycle() -> dict[str, Any]:
    value: dict[str, Any] = {"seq": 9}
    value["self"] = value
    return value


BAD_WRITE_RUN_IDS: Final[dict[str, object]] = {
    "empty": "",
    "slash": "a/b",
    "nul": "nul\x00id",
    "lone-surrogate": "sur\ud800",
    "control": "tab\tid",
    "c1-control": "del\x7fid",
    "too-long": "r" * (MAX_RUN_ID_LENGTH + 1),
    "none": None,
    "int": 5,
    "bytes": b"run",
}
"""Run ids no write may create state under."""

BAD_READ_RUN_IDS: Final[dict[str, object]] = {
    "none": None,
    "int": 5,
    "nul": "nul\x00id",
    "lone-surrogate": "sur\udc00",
}
"""Run ids not even a read can use (NUL and lone surrogates can be stored nowhere)."""

BAD_OWNERS: Final[dict[str, object]] = {
    "empty": "",
    "none": None,
    "nul": "own\x00er",
    "lone-surrogate": "own\ud800",
    "newline": "own\ner",
    "too-long": "o" * 256,
}

BAD_WRITE_REFS: Final[dict[str, object]] = {
    "empty": "",
    "empty-run": "/x",
    "empty-rest": "run/",
    "nul-in-run": "r\x00/x",
    "nul-in-rest": "run/\x00",
    "lone-surrogate": "run/\ud800",
    "control": "run/a\x7fb",
    "too-long": "run/" + "x" * MAX_REF_LENGTH,
    "none": None,
}

BAD_READ_REFS: Final[dict[str, object]] = {
    "none": None,
    "nul": "run/\x00",
    "lone-surrogate": "run/\ud800",
}

NOT_JSON_VALUES: Final[dict[str, Callable[[], dict[str, Any]]]] = {
    "set": lambda: {"seq": 9, "v": {1, 2}},
    "nan": lambda: {"seq": 9, "v": float("nan")},
    "infinity": lambda: {"seq": 9, "v": float("inf")},
    "datetime": lambda: {"seq": 9, "v": datetime.datetime(2026, 1, 1)},
    "bytes-value": lambda: {"seq": 9, "v": b"raw"},
    "int-key": lambda: {"seq": 9, "v": {1: "one"}},
    "nul-in-string": lambda: {"seq": 9, "v": "a\x00b"},
    "lone-surrogate": lambda: {"seq": 9, "v": "\ud800"},
    "lone-surrogate-key": lambda: {"seq": 9, "\udfff": 1},
    "too-deep": lambda: {"seq": 9, "v": nested(MAX_DEPTH + 1)},
    "cycle": _cycle,
}
"""Records that are not JSON the stores can keep: ``NotJsonError`` (D2)."""

NOT_DICT_RECORDS: Final[dict[str, object]] = {
    "none": None,
    "list": [1],
    "str": "e",
    "int": 5,
}

BAD_LEASES: Final[dict[str, tuple[object, str]]] = {
    "str": ("lease", "lease"),
    "object": (object(), "lease"),
    "epoch-str": (Lease(GOOD_RUN, "owner-a", "1"), "lease"),  # type: ignore[arg-type]  # the point
    "epoch-bool": (Lease(GOOD_RUN, "owner-a", True), "lease"),
    "epoch-past-int64": (Lease(GOOD_RUN, "owner-a", 2**64), "lease"),
    "run-none": (Lease(None, "owner-a", 1), "lease.run_id"),  # type: ignore[arg-type]  # the point
    "owner-nul": (Lease(GOOD_RUN, "own\x00", 1), "lease.owner"),
}
"""A presented lease that is not one, with the argument the refusal names."""

BAD_FILTERS: Final[dict[str, tuple[object, str]]] = {
    "str": ("ok", "run_filter"),
    "status-int": (RunFilter(status=5), "RunFilter.status"),  # type: ignore[arg-type]  # the point
    "statuses-str": (RunFilter(statuses="ok"), "RunFilter.statuses"),
    "name-nul": (RunFilter(name="a\x00"), "RunFilter.name"),
    "tags-surrogate": (RunFilter(tags=["\ud800"]), "RunFilter.tags"),
}

BAD_BLOBS: Final[dict[str, object]] = {"str": "text", "none": None, "list": [1, 2]}
