"""The same bad inputs through every backend and every public method.

Each case must raise ``InvalidArgumentError`` (``NotJsonError`` for values that
are not JSON), name the argument at fault, never be retryable, and leave the
location byte-for-byte as it was: the backends share one rule set
(``rulvar_store._intake``) and apply it before any I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from rulvar_conformance.suites._argument_cases import (
    BAD_BLOBS,
    BAD_FILTERS,
    BAD_LEASES,
    BAD_OWNERS,
    BAD_READ_REFS,
    BAD_READ_RUN_IDS,
    BAD_WRITE_REFS,
    BAD_WRITE_RUN_IDS,
)
from rulvar_conformance.suites._argument_cases import (
    NOT_JSON_VALUES as KIT_NOT_JSON_VALUES,
)
from rulvar_store import (
    ContractError,
    InvalidArgumentError,
    NotJsonError,
)
from rulvar_store.backend import MAX_BLOB_BYTES, MAX_RECORD_BYTES
from tests.intake._rigs import GOOD_REF, GOOD_RUN, Rig


@dataclass(frozen=True)
class Case:
    """``action(rig, value)`` must be refused, blaming ``argument``."""

    action: Callable[[Rig, Any], object]
    value: Any
    argument: str
    error: type[InvalidArgumentError] = InvalidArgumentError
    needs_leases: bool = False

    def call(self, rig: Rig) -> object:
        return self.action(rig, self.value)


def _huge_entry() -> dict[str, Any]:
    return {"seq": 9, "v": "x" * MAX_RECORD_BYTES}


# The kit's argument-rules suite drives the same tables through any store; the
# record past the size bound is this file's own (the kit does not write 64 MiB).
NOT_JSON_VALUES: dict[str, Callable[[], dict[str, Any]]] = {
    **KIT_NOT_JSON_VALUES,
    "huge": _huge_entry,
}


def _meta(run_id: object, **extra: Any) -> dict[str, Any]:
    return {"runId": run_id, "status": "ok", "updatedAt": "t1", **extra}


def _cases() -> list[Any]:
    cases: dict[str, Case] = {}
    add = cases.__setitem__
    for name, run_id in BAD_WRITE_RUN_IDS.items():
        add(
            f"append-run_id-{name}",
            Case(lambda rig, v: rig.journal.append(v, {"seq": 9}), run_id, "run_id"),
        )
        add(
            f"put_meta-runId-{name}",
            Case(
                lambda rig, v: rig.journal.put_meta(_meta(v)), run_id, "meta['runId']"
            ),
        )
        add(
            f"acquire-run_id-{name}",
            Case(
                lambda rig, v: rig.journal.acquire(v, "owner-b"),
                run_id,
                "run_id",
                needs_leases=True,
            ),
        )
    for name, run_id in BAD_READ_RUN_IDS.items():
        for method in ("load", "get_meta", "delete"):
            add(
                f"{method}-run_id-{name}",
                Case(
                    lambda rig, v: getattr(rig.journal, v[0])(v[1]),
                    (method, run_id),
                    "run_id",
                ),
            )
        add(
            f"list_refs-run_id-{name}",
            Case(lambda rig, v: rig.blobs.list_refs(v), run_id, "run_id"),
        )
    for name, owner in BAD_OWNERS.items():
        add(
            f"acquire-owner-{name}",
            Case(
                lambda rig, v: rig.journal.acquire("fresh-run", v),
                owner,
                "owner",
                needs_leases=True,
            ),
        )
    for name, ref in BAD_WRITE_REFS.items():
        add(
            f"blob-put-ref-{name}",
            Case(lambda rig, v: rig.blobs.put(v, b"x"), ref, "ref"),
        )
    for name, ref in BAD_READ_REFS.items():
        add(f"blob-get-ref-{name}", Case(lambda rig, v: rig.blobs.get(v), ref, "ref"))
        add(
            f"blob-delete-ref-{name}",
            Case(lambda rig, v: rig.blobs.delete(v), ref, "ref"),
        )
    for name, make in NOT_JSON_VALUES.items():
        add(
            f"append-entry-{name}",
            Case(
                lambda rig, v: rig.journal.append(GOOD_RUN, v(), rig.lease),
                make,
                "entry",
                NotJsonError,
            ),
        )
        add(
            f"put_meta-meta-{name}",
            Case(
                lambda rig, v: rig.journal.put_meta(
                    {**v(), **_meta(GOOD_RUN)}, rig.lease
                ),
                make,
                "meta",
                NotJsonError,
            ),
        )
    for name, entry in {"none": None, "list": [1], "str": "e", "int": 5}.items():
        add(
            f"append-entry-not-dict-{name}",
            Case(lambda rig, v: rig.journal.append(GOOD_RUN, v), entry, "entry"),
        )
        add(
            f"put_meta-meta-not-dict-{name}",
            Case(lambda rig, v: rig.journal.put_meta(v), entry, "meta"),
        )
    add(
        "put_meta-meta-no-runId",
        Case(lambda rig, v: rig.journal.put_meta(v), {"status": "ok"}, "meta"),
    )
    for name, (lease, argument) in BAD_LEASES.items():
        add(
            f"append-lease-{name}",
            Case(
                lambda rig, v: rig.journal.append(GOOD_RUN, {"seq": 9}, v),
                lease,
                argument,
            ),
        )
        add(
            f"put_meta-lease-{name}",
            Case(
                lambda rig, v: rig.journal.put_meta(_meta(GOOD_RUN), v), lease, argument
            ),
        )
        add(
            f"delete-lease-{name}",
            Case(lambda rig, v: rig.journal.delete(GOOD_RUN, v), lease, argument),
        )
        add(
            f"blob-put-lease-{name}",
            Case(lambda rig, v: rig.blobs.put(GOOD_REF, b"new", v), lease, argument),
        )
        add(
            f"blob-delete-lease-{name}",
            Case(lambda rig, v: rig.blobs.delete(GOOD_REF, v), lease, argument),
        )
        for method in ("renew", "release"):
            add(
                f"{method}-lease-{name}",
                Case(
                    lambda rig, v: getattr(rig.journal, v[0])(v[1]),
                    (method, lease),
                    argument,
                    needs_leases=True,
                ),
            )
    for method in ("renew", "release"):
        add(
            f"{method}-lease-none",
            Case(
                lambda rig, v: getattr(rig.journal, v)(None),
                method,
                "lease",
                needs_leases=True,
            ),
        )
    for name, (run_filter, argument) in BAD_FILTERS.items():
        add(
            f"list_runs-{name}",
            Case(lambda rig, v: rig.journal.list_runs(v), run_filter, argument),
        )
    for name, blob in BAD_BLOBS.items():
        add(
            f"blob-put-blob-{name}",
            Case(lambda rig, v: rig.blobs.put("good-run/other", v), blob, "blob"),
        )
    add(
        "blob-put-blob-too-big",
        # bytes(n) is calloc'ed: no page is touched, so this costs no real memory.
        Case(
            lambda rig, v: rig.blobs.put("good-run/other", bytes(v)),
            MAX_BLOB_BYTES + 1,
            "blob",
        ),
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
