"""The same bad inputs through every backend and every public method.

Each case must raise ``InvalidArgumentError`` (``NotJsonError`` for values that
are not JSON), name the argument at fault, never be retryable, and leave the
location byte-for-byte as it was: the backends share one rule set
(``rulvar_store._intake``) and apply it before any I/O.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from rulvar_store import (
    ContractError,
    InvalidArgumentError,
    Lease,
    NotJsonError,
    RunFilter,
)
from rulvar_store._intake import (
    MAX_BLOB_BYTES,
    MAX_DEPTH,
    MAX_RECORD_BYTES,
    MAX_REF_LENGTH,
    MAX_RUN_ID_LENGTH,
)
from tests.intake._rigs import GOOD_REF, GOOD_RUN, Rig


@dataclass(frozen=True)
class Case:
    call: Callable[[Rig], object]
    argument: str
    error: type[InvalidArgumentError] = InvalidArgumentError
    needs_leases: bool = False


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"v": value}
    return value


def _cycle() -> dict[str, Any]:
    value: dict[str, Any] = {"seq": 9}
    value["self"] = value
    return value


def _huge_entry() -> dict[str, Any]:
    return {"seq": 9, "v": "x" * MAX_RECORD_BYTES}


# Run ids no write may create state under.
BAD_WRITE_RUN_IDS: dict[str, object] = {
    "empty": "",
    "slash": "a/b",
    "nul": "nul\x00id",
    "lone-surrogate": "sur\ud800",
    "control": "tab\tid",
    "too-long": "r" * (MAX_RUN_ID_LENGTH + 1),
    "none": None,
    "int": 5,
    "bytes": b"run",
}
# Run ids not even a read can use.
BAD_READ_RUN_IDS: dict[str, object] = {
    "none": None,
    "int": 5,
    "nul": "nul\x00id",
    "lone-surrogate": "sur\udc00",
}
BAD_OWNERS: dict[str, object] = {
    "empty": "",
    "none": None,
    "nul": "own\x00er",
    "lone-surrogate": "own\ud800",
    "newline": "own\ner",
    "too-long": "o" * 256,
}
BAD_WRITE_REFS: dict[str, object] = {
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
BAD_READ_REFS: dict[str, object] = {
    "none": None,
    "nul": "run/\x00",
    "lone-surrogate": "run/\ud800",
}
NOT_JSON_VALUES: dict[str, Callable[[], dict[str, Any]]] = {
    "set": lambda: {"seq": 9, "v": {1, 2}},
    "nan": lambda: {"seq": 9, "v": float("nan")},
    "infinity": lambda: {"seq": 9, "v": float("inf")},
    "datetime": lambda: {"seq": 9, "v": datetime.datetime(2026, 1, 1)},
    "bytes-value": lambda: {"seq": 9, "v": b"raw"},
    "int-key": lambda: {"seq": 9, "v": {1: "one"}},
    "nul-in-string": lambda: {"seq": 9, "v": "a\x00b"},
    "lone-surrogate": lambda: {"seq": 9, "v": "\ud800"},
    "lone-surrogate-key": lambda: {"seq": 9, "\udfff": 1},
    "too-deep": lambda: {"seq": 9, "v": _nested(MAX_DEPTH + 1)},
    "cycle": _cycle,
    "huge": _huge_entry,
}
BAD_LEASES: dict[str, tuple[object, str]] = {
    "str": ("lease", "lease"),
    "object": (object(), "lease"),
    "epoch-str": (Lease(GOOD_RUN, "owner-a", "1"), "lease"),  # type: ignore[arg-type]  # the point
    "epoch-bool": (Lease(GOOD_RUN, "owner-a", True), "lease"),
    "epoch-past-int64": (Lease(GOOD_RUN, "owner-a", 2**64), "lease"),
    "run-none": (Lease(None, "owner-a", 1), "lease.run_id"),  # type: ignore[arg-type]  # the point
    "owner-nul": (Lease(GOOD_RUN, "own\x00", 1), "lease.owner"),
}
BAD_FILTERS: dict[str, tuple[object, str]] = {
    "str": ("ok", "run_filter"),
    "status-int": (RunFilter(status=5), "RunFilter.status"),  # type: ignore[arg-type]  # the point
    "statuses-str": (RunFilter(statuses="ok"), "RunFilter.statuses"),
    "name-nul": (RunFilter(name="a\x00"), "RunFilter.name"),
    "tags-surrogate": (RunFilter(tags=["\ud800"]), "RunFilter.tags"),
}
BAD_BLOBS: dict[str, object] = {"str": "text", "none": None, "list": [1, 2]}


def _cases() -> list[Any]:
    cases: dict[str, Case] = {}
    for name, run_id in BAD_WRITE_RUN_IDS.items():
        cases[f"append-run_id-{name}"] = Case(
            lambda rig, r=run_id: rig.journal.append(r, {"seq": 9}), "run_id"
        )
        cases[f"put_meta-runId-{name}"] = Case(
            lambda rig, r=run_id: rig.journal.put_meta(
                {"runId": r, "status": "ok", "updatedAt": "t"}
            ),
            "meta['runId']",
        )
        cases[f"acquire-run_id-{name}"] = Case(
            lambda rig, r=run_id: rig.journal.acquire(r, "owner-b"),
            "run_id",
            needs_leases=True,
        )
    for name, run_id in BAD_READ_RUN_IDS.items():
        for method in ("load", "get_meta", "delete"):
            cases[f"{method}-run_id-{name}"] = Case(
                lambda rig, r=run_id, m=method: getattr(rig.journal, m)(r), "run_id"
            )
        cases[f"list_refs-run_id-{name}"] = Case(
            lambda rig, r=run_id: rig.blobs.list_refs(r), "run_id"
        )
    for name, owner in BAD_OWNERS.items():
        cases[f"acquire-owner-{name}"] = Case(
            lambda rig, o=owner: rig.journal.acquire("fresh-run", o),
            "owner",
            needs_leases=True,
        )
    for name, ref in BAD_WRITE_REFS.items():
        cases[f"blob-put-ref-{name}"] = Case(
            lambda rig, r=ref: rig.blobs.put(r, b"x"), "ref"
        )
    for name, ref in BAD_READ_REFS.items():
        cases[f"blob-get-ref-{name}"] = Case(lambda rig, r=ref: rig.blobs.get(r), "ref")
        cases[f"blob-delete-ref-{name}"] = Case(
            lambda rig, r=ref: rig.blobs.delete(r), "ref"
        )
    for name, make in NOT_JSON_VALUES.items():
        cases[f"append-entry-{name}"] = Case(
            lambda rig, mk=make: rig.journal.append(GOOD_RUN, mk(), rig.lease),
            "entry",
            NotJsonError,
        )
        cases[f"put_meta-meta-{name}"] = Case(
            lambda rig, mk=make: rig.journal.put_meta(
                {**mk(), "runId": GOOD_RUN, "status": "ok", "updatedAt": "t1"},
                rig.lease,
            ),
            "meta",
            NotJsonError,
        )
    for name, entry in {"none": None, "list": [1], "str": "e", "int": 5}.items():
        cases[f"append-entry-not-dict-{name}"] = Case(
            lambda rig, e=entry: rig.journal.append(GOOD_RUN, e), "entry"
        )
        cases[f"put_meta-meta-not-dict-{name}"] = Case(
            lambda rig, e=entry: rig.journal.put_meta(e), "meta"
        )
    cases["put_meta-meta-no-runId"] = Case(
        lambda rig: rig.journal.put_meta({"status": "ok"}), "meta"
    )
    for name, (lease, argument) in BAD_LEASES.items():
        cases[f"append-lease-{name}"] = Case(
            lambda rig, le=lease: rig.journal.append(GOOD_RUN, {"seq": 9}, le),
            argument,
        )
        cases[f"put_meta-lease-{name}"] = Case(
            lambda rig, le=lease: rig.journal.put_meta(
                {"runId": GOOD_RUN, "status": "ok", "updatedAt": "t1"}, le
            ),
            argument,
        )
        cases[f"delete-lease-{name}"] = Case(
            lambda rig, le=lease: rig.journal.delete(GOOD_RUN, le), argument
        )
        cases[f"blob-put-lease-{name}"] = Case(
            lambda rig, le=lease: rig.blobs.put(GOOD_REF, b"new", le), argument
        )
        cases[f"blob-delete-lease-{name}"] = Case(
            lambda rig, le=lease: rig.blobs.delete(GOOD_REF, le), argument
        )
        for method in ("renew", "release"):
            cases[f"{method}-lease-{name}"] = Case(
                lambda rig, le=lease, m=method: getattr(rig.journal, m)(le),
                argument,
                needs_leases=True,
            )
    for method in ("renew", "release"):
        cases[f"{method}-lease-none"] = Case(
            lambda rig, m=method: getattr(rig.journal, m)(None),
            "lease",
            needs_leases=True,
        )
    for name, (run_filter, argument) in BAD_FILTERS.items():
        cases[f"list_runs-{name}"] = Case(
            lambda rig, f=run_filter: rig.journal.list_runs(f), argument
        )
    for name, blob in BAD_BLOBS.items():
        cases[f"blob-put-blob-{name}"] = Case(
            lambda rig, b=blob: rig.blobs.put("good-run/other", b), "blob"
        )
    cases["blob-put-blob-too-big"] = Case(
        # bytes(n) is calloc'ed: no page is touched, so this costs no real memory.
        lambda rig: rig.blobs.put("good-run/other", bytes(MAX_BLOB_BYTES + 1)),
        "blob",
    )
    return [
        pytest.param(
            case,
            id=case_id,
            marks=[pytest.mark.clause("D2")] if case.error is NotJsonError else [],
        )
        for case_id, case in cases.items()
    ]


@pytest.mark.parametrize("case", _cases())
def test_bad_input_is_a_typed_permanent_error_that_persists_nothing(
    rig: Rig, case: Case
) -> None:
    """Every backend refuses the input the same way, before any I/O."""
    if case.needs_leases and not rig.leases:
        pytest.skip(f"{rig.backend} stores have no leases (T8): no such method")
    before = rig.dump()
    with pytest.raises(case.error) as caught:
        case.call(rig)
    error = caught.value
    assert isinstance(error, ContractError)
    assert error.retryable is False
    assert error.argument == case.argument
    assert case.argument in str(error)
    if case.error is NotJsonError:
        assert isinstance(error, TypeError)
        assert isinstance(error, ValueError)
    assert rig.dump() == before


def test_the_rig_holds_the_seeded_state(rig: Rig) -> None:
    """The refusals above are measured against a location that really has data."""
    assert [entry["seq"] for entry in rig.journal.load(GOOD_RUN)] == [1]
    assert rig.journal.get_meta(GOOD_RUN)["status"] == "running"
    assert rig.blobs.get(GOOD_REF) == b"blob-0"
    assert rig.blobs.list_refs(GOOD_RUN) == [GOOD_REF]
