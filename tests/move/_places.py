"""Store locations of every backend for the copy tests, and what they hold.

``spi`` is a third-party store seen through the SPI alone: a wrapper exposing
only the protocol methods of a memory store (no rows ability, no lease peek, no
batch put), so a copy to or from it takes the SPI path end to end.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from rulvar_store import (
    JournalEntry,
    Lease,
    MemoryStore,
    OpenedStore,
    RunFilter,
    RunMeta,
    open_store,
)
from rulvar_store.ops import has_run_rows
from tests._postgres_gate import postgres_url

KINDS = ("memory", "file", "sqlite", "postgres", "spi")
LEASABLE = ("memory", "sqlite", "postgres", "spi")


class SpiJournal:
    """A journal store that offers the SPI and nothing else."""

    def __init__(self, inner: MemoryStore) -> None:
        self._inner = inner
        self.lease_ttl_ms = inner.lease_ttl_ms

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        self._inner.append(run_id, entry, lease)

    def load(self, run_id: str) -> list[JournalEntry]:
        return self._inner.load(run_id)

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        self._inner.put_meta(meta, lease)

    def get_meta(self, run_id: str) -> RunMeta | None:
        return self._inner.get_meta(run_id)

    def list_runs(self, run_filter: RunFilter | None = None) -> list[RunMeta]:
        return self._inner.list_runs(run_filter)

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        self._inner.delete(run_id, lease)

    def acquire(self, run_id: str, owner: str) -> Lease:
        return self._inner.acquire(run_id, owner)

    def renew(self, lease: Lease) -> None:
        self._inner.renew(lease)

    def release(self, lease: Lease) -> None:
        self._inner.release(lease)


class SpiBlobs:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def put(self, ref: str, blob: bytes, lease: Lease | None = None) -> None:
        self._inner.put(ref, blob, lease)

    def get(self, ref: str) -> bytes | None:
        data: bytes | None = self._inner.get(ref)
        return data

    def list_refs(self, run_id: str) -> list[str]:
        refs: list[str] = self._inner.list_refs(run_id)
        return refs

    def delete(self, ref: str, lease: Lease | None = None) -> None:
        self._inner.delete(ref, lease)


@dataclass
class Pair:
    journal: Any
    transcripts: Any

    def close(self) -> None:
        close = getattr(self.journal, "close", None)
        if callable(close):
            close()


@dataclass
class Place:
    kind: str
    url: str | None
    pair: Any  # OpenedStore or Pair
    memory: MemoryStore | None = None

    def reopen(self, **options: Any) -> Any:
        """Another handle on the same data (memory: the same domain)."""
        if self.url is not None:
            return open_store(self.url, **options)
        assert self.memory is not None
        handle = MemoryStore.sharing(self.memory)
        if self.kind == "spi":
            return Pair(SpiJournal(handle), SpiBlobs(handle.transcripts()))
        return Pair(handle, handle.transcripts())


def make_place(kind: str, tmp: Path, schemas: list[str], tag: str = "") -> Place:
    if kind in ("memory", "spi"):
        store = MemoryStore()
        if kind == "spi":
            return Place(
                kind,
                None,
                Pair(SpiJournal(store), SpiBlobs(store.transcripts())),
                store,
            )
        return Place(kind, None, Pair(store, store.transcripts()), store)
    if kind == "file":
        url = f"file://{tmp}/files{tag}"
    elif kind == "sqlite":
        url = f"sqlite:///{tmp}/store{tag}.db"
    else:
        schema = f"mv_{secrets.token_hex(5)}"
        schemas.append(schema)
        url = f"{postgres_url()}?schema={schema}"
    opened: OpenedStore = open_store(url)
    return Place(kind, url, opened)


def drop_schemas(schemas: list[str]) -> None:
    if not schemas:
        return
    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        for schema in schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def seed(pair: Any, run_id: str, entries: int = 7, *, leased: bool = True) -> None:
    """A run with every kind of record: odd seqs, unicode, unknown keys, blobs."""
    journal, blobs = pair.journal, pair.transcripts
    lease = (
        journal.acquire(run_id, "seeder")
        if leased and hasattr(journal, "acquire")
        else None
    )
    seqs: list[Any] = [1, 2, 2**70, 2**70 + 1]
    for index in range(entries):
        entry: dict[str, Any] = {
            "kind": "decision",
            "text": f"é ✓ {index}",
            "extra": {"n": [index, 1.5]},
        }
        if index < len(seqs):
            entry["seq"] = seqs[index]
        journal.append(run_id, entry, lease)
    journal.put_meta(
        {
            "runId": run_id,
            "status": "running",
            "name": "n",
            "tags": ["a"],
            "unknownKey": {"x": None},
        },
        lease,
    )
    blobs.put(f"{run_id}/ckpt/1", b"\x00\x01binary\xff", lease)
    blobs.put(f"{run_id}/ckpt/2", b"two", lease)
    blobs.put(run_id, b"slashless", lease)
    if lease is not None:
        journal.release(lease)


def entry_texts(pair: Any, run_id: str) -> list[Any]:
    """The run's entries as stored text where the store shows it, else as values."""
    journal = pair.journal
    if has_run_rows(journal):
        return [text for _, text in journal.entry_rows(run_id, 0, 10**6)]
    values: list[Any] = journal.load(run_id)
    return values


def blob_map(pair: Any, run_id: str) -> dict[str, bytes]:
    refs = [*list(pair.transcripts.list_refs(run_id)), run_id]
    found = {ref: pair.transcripts.get(ref) for ref in refs}
    return {ref: data for ref, data in found.items() if data is not None}


def epoch_of(pair: Any, run_id: str) -> int:
    """The run's epoch counter: read where offered, else what the next acquire gets - 1."""
    journal = pair.journal
    if has_run_rows(journal):
        return int(journal.epoch_counter(run_id))
    lease = journal.acquire(run_id, "epoch-probe")
    journal.release(lease)
    return int(lease.epoch) - 1


def iter_pairs() -> Iterator[tuple[str, str]]:
    for src in KINDS:
        for dst in KINDS:
            yield src, dst
