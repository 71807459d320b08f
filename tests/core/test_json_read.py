"""The fast read path returns exactly what ``json.loads`` returns (D1, J4, D6).

``load_record`` and ``load_records`` parse through orjson where that is exact
and through the stdlib where it is not (integers beyond 64 bits, NaN and
Infinity literals, overflowing numbers, lone surrogates). These properties
compare them with ``json.loads`` over generated JSON text: same types, same
values, float bits, int exactness, key order, and the same error when the
stdlib raises. The write side's orjson path (``dump_plain_record``) is compared
with the shared encoder the same way.

White-box: rulvar_store._json
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from rulvar_store._json import dump_plain_record
from rulvar_store.backend import dump_record, entry_text, load_record, load_records
from rulvar_store.errors import UnreadableRecordError

pytestmark = pytest.mark.clause("D1")


def same(left: Any, right: Any) -> bool:
    """Structural identity: types, int exactness, float bits, key order."""
    if type(left) is not type(right):
        return False
    if isinstance(left, float):
        return struct.pack("<d", left) == struct.pack("<d", right) or (
            math.isnan(left) and math.isnan(right)
        )
    if isinstance(left, dict):
        return list(left) == list(right) and all(
            same(left[key], right[key]) for key in left
        )
    if isinstance(left, list):
        return len(left) == len(right) and all(
            same(a, b) for a, b in zip(left, right, strict=True)
        )
    return bool(left == right)


def outcome(parse: Any, text: Any) -> tuple[str, Any]:
    try:
        return ("ok", parse(text))
    except Exception as exc:  # the comparison is the point: any error type
        return ("error", (type(exc), str(exc)))


def assert_same_outcome(text: str | bytes) -> None:
    expected = outcome(json.loads, text)
    got = outcome(load_record, text)
    assert got[0] == expected[0], (text, got, expected)
    if expected[0] == "ok":
        assert same(got[1], expected[1]), (text, got[1], expected[1])
    else:
        assert got[1] == expected[1], (text, got[1], expected[1])


# -- generated number text: the divergent corner of orjson ---------------------

digits = st.text("0123456789", min_size=1, max_size=40)
integer_text = st.builds(
    lambda sign, body: sign + (body.lstrip("0") or "0"),
    st.sampled_from(["", "-"]),
    digits,
)
float_text = st.builds(
    lambda whole, frac, exp: whole + ("." + frac if frac else "") + exp,
    integer_text,
    st.text("0123456789", min_size=0, max_size=25),
    st.one_of(
        st.just(""),
        st.builds(
            lambda e, sign, n: f"{e}{sign}{n}",
            st.sampled_from(["e", "E"]),
            st.sampled_from(["", "+", "-"]),
            st.integers(0, 400),
        ),
    ),
)
special_text = st.sampled_from(
    [
        "NaN",
        "Infinity",
        "-Infinity",
        "-0",
        "-0.0",
        "0.0",
        "1e400",
        "-1e400",
        "1e-400",
        "4.9e-324",
        "2.4703282292062327e-324",
        "1.7976931348623157e308",
        "1.7976931348623159e308",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "0.30000000000000004",
        "123456789012345678901234567890",
    ]
)
number_text = st.one_of(integer_text, float_text, special_text)

# Arbitrary JSON values, including big ints, -0.0 and non-ASCII keys and text.
json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.integers(min_value=-(2**200), max_value=2**200),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(st.text(max_size=8), children, max_size=5),
    ),
    max_leaves=25,
)


@given(number_text)
@example("-9223372036854775809")
@example("18446744073709551616")
@settings(max_examples=600)
def test_number_text_parses_like_the_stdlib(text: str) -> None:
    """Every number literal, alone and inside an object, parses exactly as json.loads."""
    assert_same_outcome(text)
    assert_same_outcome('{"n":' + text + ',"after":[' + text + "]}")
    assert_same_outcome(('{"n":' + text + "}").encode())


@pytest.mark.clause("D4")
@given(json_values)
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_the_shared_encoder_writes_exactly_what_json_dumps_writes(value: Any) -> None:
    """``dump_record``'s one shared encoder gives the stdlib call's text, byte for byte."""
    expected = json.dumps(
        value, ensure_ascii=False, allow_nan=False, separators=(",", ":")
    )
    assert dump_record(value) == expected


# Float-free values of exact built-in types, what ``dump_plain_record`` is given;
# text with escapes, control characters and lone surrogates, ints past 64 bits.
exact_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.integers(min_value=-(2**200), max_value=2**200),
        st.text(),
        st.text(st.sampled_from('a\x00\x01\x1f"\\/\x7f\u2028\ud800\udfff\U0001f600é')),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.lists(children, max_size=5).map(tuple),
        st.dictionaries(st.text(max_size=8), children, max_size=5),
    ),
    max_leaves=25,
)


@pytest.mark.clause("D4")
@given(exact_values)
@example({"big": 2**64, "neg": -(2**63) - 1, "edge": [2**64 - 1, -(2**63)]})
@example({"lone": "\ud800", "nested": [[[]]], "t": ("x", 1)})
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_the_orjson_writer_gives_the_shared_encoders_text_or_its_answer(
    value: Any,
) -> None:
    """Without floats, ``dump_plain_record`` writes ``dump_record``'s text, byte for byte."""
    assert outcome(dump_plain_record, value) == outcome(dump_record, value)


@pytest.mark.clause("D4")
@given(st.dictionaries(st.text(max_size=8), json_values, max_size=6))
@example({"seq": 1e16, "v": [0.1, 2**64]})
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_an_entry_is_stored_as_the_stdlib_writes_it_floats_or_not(
    entry: dict[str, Any],
) -> None:
    """The intake's choice of writer never shows: the stored text is json.dumps's."""
    expected = json.dumps(
        entry, ensure_ascii=False, allow_nan=False, separators=(",", ":")
    )
    assume("\\u0000" not in expected)  # a NUL is refused at intake, not written
    assert entry_text(entry) == expected


@given(json_values)
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_canonical_text_of_any_value_parses_like_the_stdlib(value: Any) -> None:
    """What the canonical writer stores reads back exactly as json.loads reads it."""
    text = dump_record(value)
    assert_same_outcome(text)
    assert_same_outcome(json.dumps(value, indent=1))  # other writers' spacing


@given(st.lists(st.one_of(json_values.map(dump_record), number_text), max_size=30))
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_batch_parse_equals_parsing_each_with_the_stdlib(texts: list[str]) -> None:
    """load_records over a journal equals json.loads per text, or raises as it does."""
    expected = outcome(lambda items: [json.loads(t) for t in items], texts)
    got = outcome(load_records, texts)
    assert got[0] == expected[0]
    if expected[0] == "ok":
        assert same(got[1], expected[1])
        assert same(load_records([t.encode() for t in texts]), expected[1])
    else:
        assert got[1] == expected[1]


@given(
    st.text(
        alphabet=st.sampled_from('{}[]:,"\\ 0123456789.eE+-truefalsn\ud800é'),
        max_size=30,
    )
)
@settings(max_examples=600)
def test_arbitrary_token_soup_parses_or_fails_like_the_stdlib(text: str) -> None:
    """Malformed text raises the stdlib's own error; orjson never accepts what it refuses."""
    assert_same_outcome(text)


@pytest.mark.parametrize(
    "text",
    [
        '{"a":1,"b":2,"a":3}',  # duplicate keys: last value, first position
        '{"a":{"x":1},"a":{"y":2}}',
        '"\\ud800"',  # escaped lone surrogates
        '"\\udc00x"',
        '"\ud800"',  # a raw lone surrogate, as the stdlib writer emits it
        '"\ufeff"',
        '\ufeff{"a":1}',  # a byte order mark
        '{"x":1}  ',
        " \n\t\r[1]",
        '"\\u0000\\u001f\x7f\u2028"',
        "",
    ],
)
def test_known_divergences_of_orjson_are_handled(text: str) -> None:
    """The inputs where orjson alone would differ from the stdlib give the stdlib's result."""
    assert_same_outcome(text)


def test_deeper_than_either_parser_is_typed_where_the_stdlib_recurses_out() -> None:
    """The one deliberate difference: the stdlib's RecursionError becomes typed."""
    text = "[" * 2000 + "]" * 2000
    with pytest.raises(RecursionError):
        json.loads(text)
    with pytest.raises(UnreadableRecordError):
        load_record(text)


@pytest.mark.clause("J4")
def test_big_integers_survive_in_a_journal_among_ordinary_entries() -> None:
    """An integer past 64 bits inside one entry of many keeps its exact value."""
    texts = [dump_record({"seq": i, "v": 0.1 * i, "t": "é"}) for i in range(50)]
    texts[31] = dump_record({"seq": 31, "big": 2**64, "neg": -(2**63) - 1})
    parsed = load_records(texts)
    assert parsed[31] == {"seq": 31, "big": 2**64, "neg": -(2**63) - 1}
    assert type(parsed[31]["big"]) is int
    assert same(parsed, [json.loads(t) for t in texts])
