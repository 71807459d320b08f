"""C4 self-tests of the data-edges suite: one plausible data-handling bug per check."""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final

from rulvar_store import JournalEntry, Lease, RunFilter, RunMeta
from rulvar_store.backend import (
    check_run_match,
    dump_record,
    finite_seq,
    load_record,
    meta_matches_filter,
    meta_run_id,
)
from tests.conformance.selftests._broken_memory import (
    Handle,
    Twin,
    fenced_insert,
    self_tests,
)

SUITE: Final = "data-edges"


class SeqOrderedLoad(Handle):
    """load orders entries by seq (``ORDER BY seq``), moving seq-less ones last."""

    def load(self, run_id: str) -> list[JournalEntry]:
        entries = self.inner.load(run_id)
        return sorted(
            entries, key=lambda e: (finite_seq(e) is None, finite_seq(e) or 0)
        )


class BoolSeqGuard(Handle):
    """The seq guard takes ``True`` for the int 1 (``bool`` is an ``int`` subclass)."""

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        seq = entry.get("seq")
        numeric = isinstance(seq, int | float) and math.isfinite(seq)
        fenced_insert(self, run_id, dump_record(entry), seq if numeric else None, lease)


class IntCoercedSeq(Handle):
    """The seq guard compares ``int(seq)``: floats are truncated."""

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        seq = finite_seq(entry)
        coerced = None if seq is None else int(seq)
        fenced_insert(self, run_id, dump_record(entry), coerced, lease)


class PagedLoad(Handle):
    """load reads one page of 1 000 rows and stops (a LIMIT without a loop)."""

    def load(self, run_id: str) -> list[JournalEntry]:
        return self.inner.load(run_id)[:1000]


class PagedSeqGuard(Handle):
    """The seq guard reads the stored seqs one page deep (the first 1 000 rows)."""

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        check_run_match(lease, run_id, "append")
        text, seq = dump_record(entry), finite_seq(entry)
        with self.domain.lock:
            if lease is not None:
                self.fence(lease)
            journal = self.domain.entries.setdefault(run_id, [])
            page = journal[:1000]
            if seq is not None and any(s is not None and s >= seq for _, s in page):
                self.insert(run_id, text, seq)  # raises JournalOrderViolation
            journal.append((text, seq))


class PagedListRuns(Handle):
    """list_runs returns the first page of 1 000 metas only."""

    def list_runs(self, run_filter: RunFilter | None = None) -> list[RunMeta]:
        return self.inner.list_runs(run_filter)[:1000]


class TruncatingBlobTwin(Twin):
    def put(
        self, ref: str, blob: bytes | bytearray | memoryview, lease: Lease | None = None
    ) -> None:
        self.inner.put(ref, bytes(blob)[:65_536], lease)


class TruncatingBlobs(Handle):
    """Blobs are cut at 64 KiB (a BLOB column of that size)."""

    twin_class = TruncatingBlobTwin


class LenientJson(Handle):
    """Serializes with ``allow_nan=True, default=str``: NaN, sets, dates slip in."""

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        text = json.dumps(entry, separators=(",", ":"), default=str)
        fenced_insert(self, run_id, text, finite_seq(entry), lease)


class AliasingBlobTwin(Twin):
    def put(
        self, ref: str, blob: bytes | bytearray | memoryview, lease: Lease | None = None
    ) -> None:
        check_run_match(lease, ref.split("/", 1)[0], "blob put")
        with self.domain.lock:
            if lease is not None:
                self.handle.fence(lease)
            self.domain.blobs[ref] = blob  # type: ignore[assignment]  # the bug: no copy


class AliasingBlobs(Handle):
    """Blob put keeps the caller's bytearray itself; get hands it back (D3)."""

    twin_class = AliasingBlobTwin


class NullDroppingMeta(Handle):
    """put_meta drops fields whose value is None."""

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        self.inner.put_meta({k: v for k, v in meta.items() if v is not None}, lease)


class AnyTagFilter(Handle):
    """list_runs keeps a meta carrying ANY requested tag instead of all of them."""

    def list_runs(self, run_filter: RunFilter | None = None) -> list[RunMeta]:
        if run_filter is None or not run_filter.tags:
            return self.inner.list_runs(run_filter)
        loose = RunFilter(run_filter.status, run_filter.statuses, None, run_filter.name)
        wanted = list(run_filter.tags)
        return [
            meta
            for meta in self.inner.list_runs(loose)
            if isinstance(meta.get("tags"), list)
            and any(t in meta["tags"] for t in wanted)
        ]


class EmptyStatusesUnfiltered(Handle):
    """``statuses=[]`` is read as "no status filter" (falsy check)."""

    def list_runs(self, run_filter: RunFilter | None = None) -> list[RunMeta]:
        metas = [load_record(t) for _, t in sorted(self.domain.metas.items())]
        if (
            run_filter is not None
            and not run_filter.statuses
            and run_filter.status is None
        ):
            run_filter = RunFilter(None, None, run_filter.tags, run_filter.name)
        return [meta for meta in metas if meta_matches_filter(meta, run_filter)]


class PrefixRefsTwin(Twin):
    def list_refs(self, run_id: str) -> list[str]:
        with self.domain.lock:
            return sorted(ref for ref in self.domain.blobs if ref.startswith(run_id))


class PrefixRefs(Handle):
    """list_refs matches the run id as a bare prefix, without the trailing slash."""

    twin_class = PrefixRefsTwin


class LikeRefsTwin(Twin):
    def list_refs(self, run_id: str) -> list[str]:
        # ``ref LIKE run_id || '/%'`` without ESCAPE: '_' and '%' in run_id match
        # any character(s).
        pattern = "".join(
            "." if c == "_" else ".*" if c == "%" else re.escape(c) for c in run_id
        )
        with self.domain.lock:
            return sorted(
                r for r in self.domain.blobs if re.fullmatch(pattern + "/.*", r)
            )


class LikeRefs(Handle):
    """list_refs uses LIKE without escaping the run id's wildcards."""

    twin_class = LikeRefsTwin


class FirstRefTwin(Twin):
    def last_ref(self, run_id: str, prefix: str) -> str | None:
        with self.domain.lock:
            return min(
                (ref for ref in self.domain.blobs if ref.startswith(prefix)),
                default=None,
            )


class FirstRef(Handle):
    """last_ref answers the least ref under the prefix (an ascending scan's first row)."""

    twin_class = FirstRefTwin


_EVER_PUT: Final[dict[int, set[str]]] = {}
"""Every ref a ``DeletesIgnored`` domain ever stored, by the domain's id."""


class DeletesIgnoredTwin(Twin):
    def _seen(self) -> set[str]:
        return _EVER_PUT.setdefault(id(self.domain), set())

    def put(
        self, ref: str, blob: bytes | bytearray | memoryview, lease: Lease | None = None
    ) -> None:
        self.inner.put(ref, blob, lease)
        self._seen().add(ref)

    def last_ref(self, run_id: str, prefix: str) -> str | None:
        return max(
            (ref for ref in self._seen() if ref.startswith(prefix)), default=None
        )


class DeletesIgnored(Handle):
    """last_ref reads a separate index of refs that deletes never update."""

    twin_class = DeletesIgnoredTwin


class OtherRunsTwin(Twin):
    def last_ref(self, run_id: str, prefix: str) -> str | None:
        rest = prefix.split("/", 1)[1]
        with self.domain.lock:
            return max(
                (
                    ref
                    for ref in self.domain.blobs
                    if "/" in ref and ref.split("/", 1)[1].startswith(rest)
                ),
                default=None,
            )


class OtherRuns(Handle):
    """last_ref matches the prefix's path after the run segment in every run."""

    twin_class = OtherRunsTwin


class LocaleOrderTwin(Twin):
    def last_ref(self, run_id: str, prefix: str) -> str | None:
        with self.domain.lock:
            return max(
                (ref for ref in self.domain.blobs if ref.startswith(prefix)),
                key=str.casefold,
                default=None,
            )


class LocaleOrder(Handle):
    """last_ref orders refs case-insensitively, as a locale collation does."""

    twin_class = LocaleOrderTwin


class UnsortedUnderTwin(Twin):
    def get_under(self, run_id: str, prefix: str) -> list[tuple[str, bytes]]:
        with self.domain.lock:
            return sorted(
                (
                    (ref, blob)
                    for ref, blob in self.domain.blobs.items()
                    if ref.startswith(prefix)
                ),
                key=lambda pair: pair[0].casefold(),
            )


class UnsortedUnder(Handle):
    """get_under returns its pairs in a locale's (case-folded) order, not by code point."""

    twin_class = UnsortedUnderTwin


class SlashUnderTwin(Twin):
    def get_under(self, run_id: str, prefix: str) -> list[tuple[str, bytes]]:
        # Reads the prefix as a folder: the blobs under ``prefix + "/"`` only.
        folder = prefix if prefix.endswith("/") else prefix + "/"
        with self.domain.lock:
            return sorted(
                (ref, blob)
                for ref, blob in self.domain.blobs.items()
                if ref.startswith(folder)
            )


class SlashUnder(Handle):
    """get_under treats the prefix as a folder: a ref equal to it, or extending its
    last segment, is left out."""

    twin_class = SlashUnderTwin


class DeletedUnderTwin(DeletesIgnoredTwin):
    def get_under(self, run_id: str, prefix: str) -> list[tuple[str, bytes]]:
        return sorted(
            (ref, ref.encode()) for ref in self._seen() if ref.startswith(prefix)
        )


class DeletedUnder(Handle):
    """get_under reads a separate index that deletes never update."""

    twin_class = DeletedUnderTwin


class OtherRunsUnderTwin(Twin):
    def get_under(self, run_id: str, prefix: str) -> list[tuple[str, bytes]]:
        rest = prefix.split("/", 1)[1]
        with self.domain.lock:
            return sorted(
                (ref, blob)
                for ref, blob in self.domain.blobs.items()
                if "/" in ref and ref.split("/", 1)[1].startswith(rest)
            )


class OtherRunsUnder(Handle):
    """get_under matches the prefix's path after the run segment in every run."""

    twin_class = OtherRunsUnderTwin


class SortedKeysJournal(Handle):
    """Entries are normalized on the way in (sorted keys, as a jsonb column would)."""

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        text = json.dumps(entry, sort_keys=True, separators=(",", ":"), allow_nan=False)
        fenced_insert(self, run_id, text, finite_seq(entry), lease)


class FloatNumbersMeta(Handle):
    """Meta numbers pass through float (a JS-style number column): big ints drift."""

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        def floats(value: Any) -> Any:
            if isinstance(value, dict):
                return {k: floats(v) for k, v in value.items()}
            if isinstance(value, list):
                return [floats(v) for v in value]
            if isinstance(value, int) and not isinstance(value, bool):
                return int(float(value))
            return value

        self.inner.put_meta(floats(meta), lease)


class PrefixDelete(Handle):
    """delete removes every run whose id starts with the given one (LIKE 'id%')."""

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        with self.domain.lock:
            for run in [r for r in self.domain.entries if r.startswith(run_id)]:
                self.inner.delete(
                    run, None if lease is None or run != run_id else lease
                )
            self.inner.delete(run_id, lease)


class CascadingDelete(Handle):
    """delete also removes the run's blobs (T5: only delete_run cascades)."""

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        with self.domain.lock:
            self.inner.delete(run_id, lease)
            for ref in [r for r in self.domain.blobs if r.startswith(run_id + "/")]:
                del self.domain.blobs[ref]


class LikeLoad(Handle):
    """load matches the run id with LIKE, unescaped: 'd_x' also reads 'dyx'."""

    def load(self, run_id: str) -> list[JournalEntry]:
        pattern = "".join(
            "." if c == "_" else ".*" if c == "%" else re.escape(c) for c in run_id
        )
        with self.domain.lock:
            runs = sorted(r for r in self.domain.entries if re.fullmatch(pattern, r))
        return [e for run in runs for e in self.inner.load(run)]


class FreshTwinEachCall(Handle):
    """transcripts() builds a new twin on every call (T7)."""

    def transcripts(self) -> Twin:
        return self.twin_class(self)


BROKEN: Final[tuple[tuple[type[Handle], str], ...]] = (
    (SeqOrderedLoad, "data-unseq-keeps-position"),
    (BoolSeqGuard, "data-non-number-seq"),
    (IntCoercedSeq, "data-float-and-huge-seq"),
    (PagedLoad, "data-long-listings"),
    (PagedListRuns, "data-long-listings"),
    (PagedSeqGuard, "data-long-listings"),
    (TruncatingBlobs, "data-big-payloads"),
    (LenientJson, "data-non-json-persists-nothing"),
    (AliasingBlobs, "data-snapshots"),
    (NullDroppingMeta, "data-null-meta-fields"),
    (AnyTagFilter, "data-run-filter-fields"),
    (EmptyStatusesUnfiltered, "data-run-filter-fields"),
    (PrefixRefs, "data-list-refs-exact"),
    (LikeRefs, "data-list-refs-exact"),
    (FreshTwinEachCall, "data-transcripts-twin"),
    (FirstRef, "data-last-ref-exact"),
    (DeletesIgnored, "data-last-ref-exact"),
    (OtherRuns, "data-last-ref-exact"),
    (LocaleOrder, "data-last-ref-exact"),
    (UnsortedUnder, "data-get-under-exact"),
    (SlashUnder, "data-get-under-exact"),
    (DeletedUnder, "data-get-under-exact"),
    (OtherRunsUnder, "data-get-under-exact"),
    (SortedKeysJournal, "data-exact-text"),
    (FloatNumbersMeta, "data-exact-text"),
    (PrefixDelete, "data-run-ids-exact"),
    (CascadingDelete, "data-run-ids-exact"),
    (LikeLoad, "data-run-ids-exact"),
)

SELF_TESTED: Final = frozenset(check_id for _, check_id in BROKEN)


test_broken_store_fails_the_named_check, test_honest_handle_passes = self_tests(
    [(cls, SUITE, check_id) for cls, check_id in BROKEN], "data-handling bug"
)


def test_meta_helper_names_the_run() -> None:
    """The variants key metas by ``runId`` exactly as the honest store does."""
    assert meta_run_id({"runId": "r", "status": "ok"}) == "r"
