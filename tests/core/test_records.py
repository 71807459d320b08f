"""Records and intake rules: D5, D7, D9."""

from __future__ import annotations

import math

import pytest

from rulvar_store import ConfigError, RunFilter
from rulvar_store.backend import finite_seq, meta_matches_filter, validate_ttl_ms

META = {
    "runId": "r",
    "status": "running",
    "updatedAt": "t",
    "name": "wf",
    "tags": ["a", "b"],
}


@pytest.mark.clause("D7")
@pytest.mark.parametrize(
    ("run_filter", "matches"),
    [
        (None, True),
        (RunFilter(), True),
        (RunFilter(status="running"), True),
        (RunFilter(status="ok"), False),
        (RunFilter(statuses=["ok", "running"]), True),
        (RunFilter(statuses=[]), False),
        (RunFilter(status="ok", statuses=["running"]), True),
        (RunFilter(name="wf"), True),
        (RunFilter(name="other"), False),
        (RunFilter(tags=["a"]), True),
        (RunFilter(tags=["a", "c"]), False),
    ],
)
def test_meta_matches_filter_follows_d7(
    run_filter: RunFilter | None, matches: bool
) -> None:
    """Status OR statuses, exact name, every tag present; statuses=[] alone matches nothing."""
    assert meta_matches_filter(META, run_filter) is matches


@pytest.mark.clause("D7")
def test_meta_without_tags_matches_no_tag_filter() -> None:
    assert not meta_matches_filter(
        {"runId": "r", "status": "ok"}, RunFilter(tags=["a"])
    )


@pytest.mark.clause("D5")
@pytest.mark.parametrize(
    ("seq", "expected"),
    [
        (0, 0),
        (3, 3),
        (2.5, 2.5),
        (True, None),
        (False, None),
        (math.nan, None),
        (math.inf, None),
        ("3", None),
        (None, None),
    ],
)
def test_finite_seq_accepts_only_finite_non_bool_numbers(
    seq: object, expected: object
) -> None:
    """A bool seq bypasses the guard rather than acting as 1 (D5)."""
    assert finite_seq({"seq": seq}) == expected


@pytest.mark.clause("D5")
def test_entry_without_seq_has_no_finite_seq() -> None:
    assert finite_seq({"kind": "step"}) is None


@pytest.mark.clause("D9")
@pytest.mark.parametrize("ttl_ms", [0, -1, 2_147_483_648, True, 1.5, "60000", None])
def test_invalid_ttl_is_a_config_error(ttl_ms: object) -> None:
    """A zero or negative ttl would make every lease born expired."""
    with pytest.raises(ConfigError):
        validate_ttl_ms(ttl_ms)


@pytest.mark.clause("D9")
@pytest.mark.parametrize("ttl_ms", [1, 60_000, 2_147_483_647])
def test_valid_ttl_is_returned(ttl_ms: int) -> None:
    assert validate_ttl_ms(ttl_ms) == ttl_ms
