"""``data_edges_conformance(certification)``: what a store does with data at the edges.

Seqs that are not plain ints (D5), journals and listings long enough to cross
any paging, payloads far beyond 64 KiB, values that are not JSON (D2), objects
that must be snapshots at the boundary (D3), null meta fields (D6), every
RunFilter field and combination (M4, D7), exact ``list_refs`` (T4) and the
memoized transcript twin (T7). Runs on every backend, file stores included;
where the location is shared, what was written is read back through a second
handle, as another process would see it.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from typing import Any, Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.kit import (
    ConformanceCheck,
    ConformanceSuite,
    attempt,
    build_check,
    not_run,
    require,
)
from rulvar_conformance.harness.probe import describe, difference, typed_refusal
from rulvar_conformance.harness.site import at_fresh_location
from rulvar_conformance.suites._exact_edges import exact_text, run_ids_exact
from rulvar_conformance.suites._filter_edges import list_refs_exact, run_filters
from rulvar_conformance.suites._get_under_edges import get_under_exact
from rulvar_conformance.suites._last_ref_edges import last_ref_exact
from rulvar_conformance.suites._seq_edges import (
    float_and_huge_seqs,
    non_number_seqs,
    unseq_position,
)
from rulvar_store import (
    JournalEntry,
    JournalOrderViolation,
    OpenedStore,
    RunMeta,
    read_run_meta,
)
from rulvar_store.backend import LocationFactory, stable_stringify

__all__ = ["LONG_JOURNAL", "MANY_RUNS", "SPEC", "data_edges_conformance"]

LONG_JOURNAL: Final = 5_000
"""Entries of the long journal: past any page of 1 000, 2 000 or 4 096 rows."""

MANY_RUNS: Final = 1_100
"""Metas and blob refs of the long listings: past a page of 1 000."""

BIG_TEXT_CHARS: Final = 1 << 20
"""A 1 Mi-character string (about 1.6 MiB of UTF-8): far beyond 64 KiB."""

BIG_BLOB_BYTES: Final = 2 << 20

WRITER_THREADS: Final = 4


@contextmanager
def _handles(locations: LocationFactory) -> Iterator[tuple[OpenedStore, OpenedStore]]:
    """A writer handle and a reader: a second handle when the location is shared."""
    with at_fresh_location(locations) as site:
        writer = site.open()
        reader = site.open() if site.location.shared else writer
        yield writer, reader


def _big_text() -> str:
    # Multi-byte characters make byte and character lengths differ, so a cut
    # counted in either unit shows; no NUL and no lone surrogate (not storable).
    unit = "δοκιμή ☃ 🚀 edge-" + "".join(chr(c) for c in range(0x20, 0x7F))
    return (unit * (BIG_TEXT_CHARS // len(unit) + 1))[:BIG_TEXT_CHARS]


def _same(observed: Any, expected: Any, what: str) -> None:
    require(
        stable_stringify(observed) == stable_stringify(expected),
        f"{what}: {difference(expected, observed)}",
    )


# -- seqs --------------------------------------------------------------------------


def _seq_check(locations: LocationFactory, body: Callable[[Any], None]) -> None:
    with _handles(locations) as (writer, _reader):
        body(writer.journal)


# -- long journals and listings ----------------------------------------------------


def _long_listings(locations: LocationFactory) -> None:
    with _handles(locations) as (writer, reader):
        journal = writer.journal
        entries = [
            {"seq": seq, "kind": "step", "key": f"k{seq}", "value": seq * 7}
            for seq in range(LONG_JOURNAL)
        ]
        for item in entries:
            journal.append("long", item)
        journal.append("long-sibling", {"seq": 0, "key": "sibling"})
        for stale_seq in (LONG_JOURNAL - 1, LONG_JOURNAL // 2, 1_500):
            late = attempt(partial(journal.append, "long", {"seq": stale_seq}))
            require(
                isinstance(late.error, JournalOrderViolation),
                f"append of seq {stale_seq} to a {LONG_JOURNAL}-entry journal whose tail "
                f"is {LONG_JOURNAL - 1}: expected JournalOrderViolation (the guard "
                f"sees every stored seq, J6), observed {describe(late.error)}",
            )
        for source in (writer, reader):
            loaded = source.journal.load("long")
            require(
                len(loaded) == LONG_JOURNAL,
                f"load of a {LONG_JOURNAL}-entry journal: expected {LONG_JOURNAL} "
                f"entries, observed {len(loaded)}",
            )
            _same(loaded, entries, f"load of a {LONG_JOURNAL}-entry journal, in order")
        metas = [
            {"runId": f"many-{index:05d}", "status": "running", "updatedAt": "u"}
            for index in range(MANY_RUNS)
        ]
        _in_parallel([partial(journal.put_meta, meta) for meta in metas])
        listed = sorted(
            reader.journal.list_runs(), key=lambda meta: str(meta.get("runId"))
        )
        _same(listed, metas, f"list_runs() over {MANY_RUNS} metas")
        refs = [f"paged/r{index:05d}" for index in range(MANY_RUNS)]
        put = writer.transcripts.put
        _in_parallel([partial(put, ref, ref.encode()) for ref in refs])
        got = reader.transcripts.list_refs("paged")
        require(
            got == refs,
            f"list_refs('paged') over {MANY_RUNS} refs: expected {MANY_RUNS} sorted "
            f"refs, observed {len(got)} (first {got[:2]}, last {got[-2:]})",
        )


def _in_parallel(calls: list[Callable[[], object]]) -> None:
    """Run independent writes on a few threads (stores are thread-safe, CONTRACT
    preamble); only the wall time of the long listings depends on it."""
    with ThreadPoolExecutor(max_workers=WRITER_THREADS) as pool:
        for future in [pool.submit(call) for call in calls]:
            future.result()


def _big_payloads(locations: LocationFactory) -> None:
    text = _big_text()
    with _handles(locations) as (writer, reader):
        item: JournalEntry = {"seq": 0, "kind": "step", "value": {"text": text}}
        writer.journal.append("big", item)
        tail: JournalEntry = {"seq": 1, "kind": "step", "value": {"after": "big"}}
        writer.journal.append("big", tail)
        meta: RunMeta = {"runId": "big", "status": "ok", "updatedAt": "u", "note": text}
        writer.journal.put_meta(meta)
        blob = bytes(range(256)) * (BIG_BLOB_BYTES // 256)
        writer.transcripts.put("big/blob", blob)
        loaded = reader.journal.load("big")
        require(
            stable_stringify(loaded) == stable_stringify([item, tail]),
            f"a journal entry with a {len(text)}-character string: expected it "
            f"byte for byte, observed {len(loaded)} entries "
            f"(first text {len(str(loaded[0].get('value', {}).get('text', ''))) if loaded else 0} chars)",
        )
        got = read_run_meta(reader.journal, "big")
        require(
            got is not None and stable_stringify(got) == stable_stringify(meta),
            f"a meta with a {len(text)}-character field: expected it byte for byte, "
            f"observed {'None' if got is None else len(str(got.get('note', '')))} chars",
        )
        listed = [m for m in reader.journal.list_runs() if m.get("runId") == "big"]
        require(
            stable_stringify(listed) == stable_stringify([meta]),
            f"list_runs() of a meta with a {len(text)}-character field: expected it "
            f"byte for byte, observed {len(listed)} metas "
            f"({[len(str(m.get('note', ''))) for m in listed]} chars)",
        )
        back = reader.transcripts.get("big/blob")
        require(
            back == blob,
            f"a {len(blob)}-byte blob: expected it byte for byte, observed "
            f"{'None' if back is None else f'{len(back)} bytes'}",
        )


# -- D2: nothing that is not JSON persists -------------------------------------------

NON_JSON: Final[tuple[tuple[str, Callable[[], Any]], ...]] = (
    ("a set", lambda: {1, 2}),
    ("NaN", lambda: math.nan),
    ("Infinity", lambda: math.inf),
    ("-Infinity", lambda: -math.inf),
    ("a datetime", lambda: datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)),
    ("bytes", lambda: b"raw"),
    ("an object", lambda: object()),
    ("a set nested deep", lambda: {"a": [1, {"b": [{"c": {"d": {3}}}]}]}),
    ("NaN nested deep", lambda: [[{"x": [0.5, math.nan]}]]),
)


def _non_json(locations: LocationFactory) -> None:
    with _handles(locations) as (writer, reader):
        journal = writer.journal
        journal.append("nonjson", {"seq": 0, "value": "kept"})
        meta: RunMeta = {"runId": "nonjson", "status": "running", "updatedAt": "u"}
        journal.put_meta(meta)
        for label, make in NON_JSON:
            bad_entry = {"seq": 1, "value": {"payload": make()}}
            outcome = attempt(partial(journal.append, "nonjson", bad_entry))
            require(
                typed_refusal(outcome.error),
                f"append of an entry holding {label}: expected TypeError, ValueError "
                f"or ContractError (D2), observed {describe(outcome.error)}",
            )
            bad_meta = {**meta, "status": "ok", "extra": make()}
            refused = attempt(partial(journal.put_meta, bad_meta))
            require(
                typed_refusal(refused.error),
                f"put_meta of a meta holding {label}: expected TypeError, ValueError "
                f"or ContractError (D2), observed {describe(refused.error)}",
            )
            _same(
                reader.journal.load("nonjson"),
                [{"seq": 0, "value": "kept"}],
                f"the journal after the refused append of {label} (nothing persists)",
            )
            _same(
                read_run_meta(reader.journal, "nonjson"),
                meta,
                f"the meta after the refused put_meta of {label} (nothing persists)",
            )
        nan_seq = attempt(lambda: journal.append("nonjson", {"seq": math.nan}))
        require(
            typed_refusal(nan_seq.error),
            f"append of seq NaN: expected a D2 refusal, observed {describe(nan_seq.error)}",
        )
        after = attempt(lambda: journal.append("nonjson", {"seq": 1, "value": "next"}))
        require(
            after.ok,
            "append of seq 1 after the refused appends: expected success (a refused "
            f"append claims no seq), observed {describe(after.error)}",
        )


# -- D3: snapshots at the boundary ---------------------------------------------------


def _snapshots(locations: LocationFactory) -> None:
    with _handles(locations) as (writer, reader):
        journal = writer.journal
        item: dict[str, Any] = {"seq": 0, "value": {"list": [1, 2], "map": {"k": "v"}}}
        journal.append("snap", item)
        item["value"]["list"].append(3)
        item["value"]["map"]["k"] = "mutated"
        item["extra"] = True
        original = [{"seq": 0, "value": {"list": [1, 2], "map": {"k": "v"}}}]
        _same(
            reader.journal.load("snap"),
            original,
            "load after mutating the appended dict",
        )
        loaded = journal.load("snap")
        loaded[0]["value"]["list"].append(4)
        loaded.append({"seq": 9})
        _same(journal.load("snap"), original, "load after mutating a loaded entry")
        meta: RunMeta = {
            "runId": "snap",
            "status": "running",
            "updatedAt": "u",
            "tags": ["a"],
        }
        kept = {**meta, "tags": ["a"]}
        journal.put_meta(meta)
        meta["tags"].append("b")
        meta["status"] = "mutated"
        _same(
            read_run_meta(reader.journal, "snap"),
            kept,
            "meta after mutating the put dict",
        )
        got = read_run_meta(journal, "snap")
        if got is not None:
            got["tags"].append("c")
            got["status"] = "mutated"
        for listed in journal.list_runs():
            listed["status"] = "mutated"
            listed.setdefault("tags", []).append("d")
        _same(
            read_run_meta(journal, "snap"), kept, "meta after mutating returned metas"
        )
        _same(journal.list_runs(), [kept], "list_runs after mutating returned metas")
        buffer = bytearray(b"abc")
        writer.transcripts.put("snap/blob", buffer)
        buffer[0] = 0x58
        view_source = bytearray(b"xyz")
        writer.transcripts.put("snap/view", memoryview(view_source))
        view_source[0] = 0x41
        for ref, expected in (("snap/blob", b"abc"), ("snap/view", b"xyz")):
            back = reader.transcripts.get(ref)
            require(
                back == expected and type(back) is bytes,
                f"get({ref!r}) after mutating the buffer that was put: expected "
                f"bytes {expected!r}, observed {type(back).__name__} {back!r}",
            )


# -- D6: nulls are values -------------------------------------------------------------


def _null_meta_fields(locations: LocationFactory) -> None:
    meta: RunMeta = {
        "runId": "nulls", "status": "running", "updatedAt": "u",
        "name": None, "tags": None, "budgetUsd": None, "workflowName": None,
        "scope": {"tenant": None, "account": "acme"}, "segments": None,
        "unknownNull": None, "list": [None, 0, "", False], "empty": {},
    }  # fmt: skip
    with _handles(locations) as (writer, reader):
        writer.journal.put_meta(meta)
        _same(read_run_meta(reader.journal, "nulls"), meta, "a meta with null fields")
        listed = [m for m in reader.journal.list_runs() if m.get("runId") == "nulls"]
        _same(listed, [meta], "list_runs() of a meta with null fields")


# -- listings, refs, twin ------------------------------------------------------------


def _with_handles(
    locations: LocationFactory, body: Callable[[OpenedStore, OpenedStore], None]
) -> None:
    with _handles(locations) as (writer, reader):
        body(writer, reader)


def _filters(locations: LocationFactory) -> None:
    with _handles(locations) as (writer, _reader):
        run_filters(writer.journal)


def _refs(locations: LocationFactory) -> None:
    with _handles(locations) as (writer, _reader):
        list_refs_exact(writer.transcripts)


def _last_ref(locations: LocationFactory) -> None:
    with _handles(locations) as (writer, reader):
        last_ref_exact(writer.transcripts, reader.transcripts)


def _get_under(locations: LocationFactory) -> None:
    with _handles(locations) as (writer, reader):
        get_under_exact(writer.transcripts, reader.transcripts)


def _twin(locations: LocationFactory) -> None:
    with _handles(locations) as (writer, _reader):
        make: Any = getattr(writer.journal, "transcripts", None)
        if not callable(make):
            not_run(
                "the journal store has no transcripts() twin (T7 applies to stores with one)"
            )
        first, second = make(), make()
        require(
            first is second,
            f"transcripts() twice: expected the same memoized twin (T7), observed "
            f"two objects {type(first).__name__} at {id(first):#x} and {id(second):#x}",
        )


def data_edges_conformance(certification: Certification) -> ConformanceSuite:
    """Build the data-edges suite over fresh locations of any store."""
    locations = certification.locations
    table: list[tuple[str, str, tuple[str, ...], Callable[[], None]]] = [
        ("data-unseq-keeps-position", "entries without a seq keep their append position",
         ("J2", "D5", "J6"), partial(_seq_check, locations, unseq_position)),
        ("data-non-number-seq", "true, strings and containers are not seqs",
         ("D5", "X7", "J6", "J4"), partial(_seq_check, locations, non_number_seqs)),
        ("data-float-and-huge-seq", "float and beyond-64-bit seqs compare exactly",
         ("D5", "J6", "J4"), partial(_seq_check, locations, float_and_huge_seqs)),
        ("data-long-listings", "5 000 entries, 1 100 metas and refs, all returned in order",
         ("J2", "J3", "M4", "T4"), partial(_long_listings, locations)),
        ("data-big-payloads", "MiB entries, metas and blobs round-trip byte for byte",
         ("J4", "D1", "D6", "T1"), partial(_big_payloads, locations)),
        ("data-non-json-persists-nothing", "a value that is not JSON raises, stores nothing",
         ("D2", "X7", "J1"), partial(_non_json, locations)),
        ("data-snapshots", "mutating what was written or read changes nothing stored",
         ("D3", "X7", "D1"), partial(_snapshots, locations)),
        ("data-exact-text", "keys, their order and number types come back as written",
         ("D4", "J4", "D6", "D1"), partial(_with_handles, locations, exact_text)),
        ("data-run-ids-exact",
         "reads and deletes reach exactly their run id, never prefixes or wildcards",
         ("M6", "T5", "J5", "M5"), partial(_with_handles, locations, run_ids_exact)),
        ("data-null-meta-fields", "null meta fields round-trip as null",
         ("D6", "M3"), partial(_null_meta_fields, locations)),
        ("data-run-filter-fields", "every RunFilter field and combination follows D7",
         ("M4", "D7"), partial(_filters, locations)),
        ("data-list-refs-exact", "list_refs: sorted, exactly the run's refs, no wildcards",
         ("T4", "T3"), partial(_refs, locations)),
        ("data-last-ref-exact",
         "last_ref: the greatest live ref under a prefix, of its run only",
         ("T12", "T4", "T3"), partial(_last_ref, locations)),
        ("data-get-under-exact",
         "get_under: every live blob under a prefix, of its run only, sorted",
         ("T13", "T4", "T3", "T1"), partial(_get_under, locations)),
        ("data-transcripts-twin", "transcripts() returns one memoized twin",
         ("T7",), partial(_twin, locations)),
    ]  # fmt: skip
    checks: tuple[ConformanceCheck, ...] = tuple(
        build_check(check_id, title, clauses, body)
        for check_id, title, clauses, body in table
    )
    return ConformanceSuite("data-edges", checks)


SPEC: Final = SuiteSpec(
    "data-edges",
    data_edges_conformance,
    None,
    True,
    "seq edges, paging, big payloads, snapshots, filters, refs (D2-D7, T4, T12)",
)
