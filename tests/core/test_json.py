"""Canonical JSON: what stores persist (D1-D3) and what the kit hashes (C3)."""

from __future__ import annotations

import datetime
import math

import pytest

from rulvar_store.backend import dump_record, load_record, stable_stringify


def _circular() -> dict[str, object]:
    looped: dict[str, object] = {}
    looped["self"] = looped
    return looped


@pytest.mark.clause("D2")
@pytest.mark.parametrize(
    "value",
    [
        {"x": {1, 2}},
        {"x": datetime.datetime(2026, 1, 1)},
        {"x": math.nan},
        {"x": math.inf},
        _circular(),
    ],
    ids=["set", "datetime", "nan", "infinity", "circular"],
)
def test_non_json_values_raise_before_anything_is_persisted(value: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        dump_record(value)


@pytest.mark.clause("D4")
def test_dump_record_keeps_key_order_and_non_ascii_text() -> None:
    """Stores never reorder keys; text is stored as UTF-8, not escaped."""
    text = dump_record({"z": 1, "a": "δοκιμή ☃", "m": 0.30000000000000004})
    assert text == '{"z":1,"a":"δοκιμή ☃","m":0.30000000000000004}'
    assert load_record(text) == {"z": 1, "a": "δοκιμή ☃", "m": 0.30000000000000004}


@pytest.mark.clause("C3")
def test_stable_stringify_sorts_keys_compactly() -> None:
    assert stable_stringify({"b": [1, {"d": 1, "c": 2}], "a": "é"}) == (
        '{"a":"é","b":[1,{"c":2,"d":1}]}'
    )
