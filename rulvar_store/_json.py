"""Canonical JSON in one place: what stores persist (D1-D3) and what the kit hashes (C3).

Reading (``load_record``, ``load_records``) takes the fast path through orjson
and returns exactly what the stdlib ``json.loads`` returns for the same text:
same types, same values, same key order, same float bits. orjson diverges from
the stdlib on a few inputs, each handled here:

- Integers beyond 64 bits: orjson SILENTLY returns a float (``2**64`` becomes
  ``1.8446744073709552e19``; no error). Every such literal has at least 19
  consecutive ASCII digits, so a text holding a run of 19 or more digits (a
  conservative superset: long decimal fractions and digit strings too) is
  parsed by the stdlib instead. ``_has_long_digit_run`` finds them without a
  per-character Python loop.
- ``NaN``/``Infinity`` literals, numbers that overflow to infinity (``1e400``),
  escaped or raw lone surrogates, a UTF-8 byte order mark, nesting deeper than
  orjson's limit: orjson raises, and the text goes to ``json.loads``, which
  returns what it always did (or raises its own error, exactly as before).
- Nesting deeper than the stdlib recurses (about 1,000 levels; another
  language's writer can store more): ``RecursionError`` becomes the typed
  ``UnreadableRecordError``, a ``ValueError`` like any text that does not parse.
  So does an integer literal longer than Python converts (4,300 digits by
  default, ``sys.get_int_max_str_digits``), where the stdlib raises a bare
  ``ValueError``.
- Duplicate keys: both keep the LAST value at the position of the FIRST
  occurrence (plain dict assignment); the property tests in
  ``tests/core/test_json_read.py`` pin this.

Writing stays the stdlib's canonical form (D1-D3). orjson writes it only for
records of exact built-in types holding no float (``dump_plain_record``): there
its text is the stdlib's byte for byte (floats are the one type it spells
differently, ``1e16`` for ``1e+16``), at a tenth of the cost.
"""

from __future__ import annotations

import json
import re
import sys
from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import Any, Final

import orjson

from rulvar_store.errors import UnreadableRecordError

__all__ = [
    "dump_plain_record",
    "dump_record",
    "load_listing",
    "load_record",
    "load_records",
    "stable_stringify",
    "unreadable_listing",
]


# ``json.dumps`` with any non-default option builds a new encoder on every call
# (about 40% of a 250-byte entry's serialization); one shared encoder gives the
# same text and errors. ``encode`` keeps no state between calls (its circular
# reference markers are made per call), so threads may share it.
_RECORD_ENCODER: Final = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":")
)


def dump_record(value: Any) -> str:
    """Serialize an entry or meta record before anything becomes durable (D2).

    Key order is kept exactly as given (D4: no reordering). NaN, Infinity and
    non-JSON values raise ``ValueError``/``TypeError`` so nothing is persisted.
    Exactly ``json.dumps(value, ensure_ascii=False, allow_nan=False,
    separators=(",", ":"))``, through one shared encoder.
    """
    return _RECORD_ENCODER.encode(value)


def dump_plain_record(value: Any) -> str:
    """``dump_record`` for a record known to hold no float and no subclass.

    The caller's walk (``_intake``) established that ``value`` is made of
    exact ``dict`` (str keys), ``list``, ``tuple``, ``str``, ``int``, ``bool``
    and ``None`` only; for those, orjson's text equals the stdlib's (a property
    test pins it). What orjson refuses (an int beyond 64 bits, a lone
    surrogate, nesting past its limit) goes to ``dump_record``, which answers
    exactly as it always did.
    """
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        return dump_record(value)


def load_record(text: str | bytes) -> Any:
    """Parse stored text into a fresh object, so callers never share state (D3).

    Returns exactly what ``json.loads(text)`` returns, and raises what it raises
    (see the module docstring for how the fast path stays exact).
    """
    if _has_long_digit_run(text):
        return _stdlib_loads(text)
    try:
        return _fast_loads(text)
    except orjson.JSONDecodeError:
        return _stdlib_loads(text)


def _stdlib_loads(text: str | bytes) -> Any:
    """``json.loads``, with a record nested past its recursion limit typed."""
    try:
        return json.loads(text)
    except RecursionError:
        raise UnreadableRecordError(
            "stored record is nested deeper than this reader can parse "
            f"(over {sys.getrecursionlimit()} levels); written by another writer"
        ) from None
    except json.JSONDecodeError:
        raise  # not JSON: the stdlib's own error (the file store reads its position)
    except ValueError as exc:
        # Python refuses to convert an integer literal of more digits than
        # sys.get_int_max_str_digits() (4,300 by default; a guard against
        # quadratic conversion). The text is JSON, but not readable here.
        raise UnreadableRecordError(
            f"stored record holds a number this reader refuses to convert ({exc}); "
            "written by another writer"
        ) from exc


def load_records(texts: Sequence[str | bytes]) -> list[Any]:
    """Parse many stored texts (a journal, a listing) like ``load_record`` each.

    The 64-bit screen runs once over all texts joined, so its cost per record is
    a fraction of the parse; only the texts it flags get the exact check.
    """
    if not texts:
        return []
    try:
        suspects = _suspect_indexes(texts)
    except TypeError:  # a mix of str and bytes: screen one by one
        return [load_record(text) for text in texts]
    loads = _fast_loads
    if not suspects:
        try:
            return [loads(text) for text in texts]
        except orjson.JSONDecodeError:
            pass  # some text needs the stdlib: parse each the careful way
        return [load_record(text) for text in texts]
    return [
        load_record(text) if index in suspects else _load_screened(text)
        for index, text in enumerate(texts)
    ]


_RUN_ID: Final = re.compile(r'"runId"\s*:\s*("(?:[^"\\]|\\.)*")')


def _run_id_in(text: str | bytes) -> str:
    """The run id a meta text names (its first ``"runId"``), without parsing it all."""
    raw = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    found = _RUN_ID.search(raw)
    if found is None:
        return "<unknown run>"
    try:
        run_id = json.loads(found.group(1))
    except ValueError:
        return "<unknown run>"
    return run_id if isinstance(run_id, str) else "<unknown run>"


def load_listing(
    texts: Sequence[str | bytes], keep: Callable[[Any], bool] = lambda _: True
) -> list[Any]:
    """Parse a listing's meta records (those ``keep`` accepts); a bad one breaks only itself.

    Raises:
        UnreadableRecordError: some record cannot be read here; it names their
            runs (``run_ids``) and carries every other record (``readable``).
    """
    try:
        return [record for record in load_records(texts) if keep(record)]
    except UnreadableRecordError:
        pass  # read one by one, to keep the good and name the bad
    readable: list[Any] = []
    unreadable: list[str] = []
    for text in texts:
        try:
            record = load_record(text)
        except UnreadableRecordError:
            unreadable.append(_run_id_in(text))
            continue
        if keep(record):
            readable.append(record)
    raise unreadable_listing(readable, unreadable)


def unreadable_listing(
    readable: Sequence[Any], run_ids: Sequence[str]
) -> UnreadableRecordError:
    """The error of a listing with unreadable records: names them, keeps the rest."""
    return UnreadableRecordError(
        f"list_runs: the meta of {', '.join(map(repr, run_ids))} is nested deeper "
        "than this reader can parse (written by another writer); the other "
        f"{len(readable)} matching runs are in .readable",
        readable,
        run_ids,
    )


def _load_screened(text: str | bytes) -> Any:
    """``load_record`` for a text already known to hold no 19-digit run."""
    try:
        return _fast_loads(text)
    except orjson.JSONDecodeError:
        return _stdlib_loads(text)


_fast_loads: Final = orjson.loads

# Every ASCII digit becomes "0", every other byte " ": digit runs become runs of
# "0", found by one substring search (bytes.translate and bytes.find run in C).
_DIGIT_MASK: Final = bytes(
    0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256)
)
# The shortest integer orjson turns into a float, -9223372036854775809, has 19
# digits (the positive side starts at 2**64, 20 digits).
_RUN_LENGTH: Final = 19
_RUN: Final = b"0" * _RUN_LENGTH
# The screen first masks only every 4th character: any 19 consecutive
# positions hold 4 consecutive multiples of 4, so a 19-digit run shows as 4
# adjacent digits in that sample. ISO timestamps (separators 3 apart) never
# show; longer digit stretches (a float's 17 significant digits, hex ids) can,
# and only the texts they are in get the exact check.
_STRIDE: Final = 4
_SAMPLE_RUN: Final = b"0" * (_RUN_LENGTH // _STRIDE)


def _mask(text: str | bytes) -> bytes:
    """The digit mask of ``text``, one byte per character (positions kept)."""
    if isinstance(text, str):
        # Non-ASCII characters (and lone surrogates) become "?", one byte each,
        # so mask positions stay character positions.
        text = text.encode("ascii", "replace")
    return text.translate(_DIGIT_MASK)


def _has_long_digit_run(text: str | bytes) -> bool:
    """Whether ``text`` holds 19 or more consecutive ASCII digits."""
    if _SAMPLE_RUN not in _mask(text[::_STRIDE]):
        return False
    return _RUN in _mask(text)


# Texts checked one by one before the rest is checked in one pass.
_TEXT_CHECKS: Final = 16


def _exact_suspects(joined: str | bytes, starts: list[int], begin: int) -> set[int]:
    """Indexes of the texts from ``joined[begin:]`` on that hold a 19-digit run."""
    mask = _mask(joined[begin:])
    suspects: set[int] = set()
    hit = mask.find(_RUN)
    while hit >= 0:
        index = bisect_right(starts, begin + hit) - 1
        suspects.add(index)
        hit = mask.find(_RUN, starts[index + 1] - begin)
    return suspects


def _suspect_indexes(texts: Sequence[str | bytes]) -> set[int]:
    """Indexes of the texts that hold a run of 19 or more ASCII digits.

    Screens all texts at once: joined by a NUL (never a digit), sampled, masked
    and searched in C, so a journal without sample hits costs a few C calls.
    Each text holding a hit gets the exact check. Raises ``TypeError`` for a mix
    of str and bytes.
    """
    joined: str | bytes = (
        "\x00".join(texts)  # type: ignore[arg-type]  # a bytes item raises TypeError
        if isinstance(texts[0], str)
        else b"\x00".join(texts)  # type: ignore[arg-type]  # a str item raises TypeError
    )
    sample = _mask(joined[::_STRIDE])
    hit = sample.find(_SAMPLE_RUN)
    if hit < 0:
        return set()
    # starts[k]: where text k begins in ``joined`` (each text plus its NUL).
    starts = list(accumulate(map((1).__add__, map(len, texts)), initial=0))
    suspects: set[int] = set()
    checked = 0
    while hit >= 0:
        index = bisect_right(starts, _STRIDE * hit) - 1
        if checked == _TEXT_CHECKS:
            # Many texts show: one exact pass over the rest beats one per text.
            return suspects | _exact_suspects(joined, starts, starts[index])
        checked += 1
        if _RUN in _mask(texts[index]):
            suspects.add(index)
        # Decided for this text: go on from the next text's first sample.
        hit = sample.find(_SAMPLE_RUN, -(-starts[index + 1] // _STRIDE))
    return suspects


def stable_stringify(value: Any) -> str:
    """Canonical JSON for equality and hashing (C3): sorted keys, compact, UTF-8 text."""
    return json.dumps(
        value,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
