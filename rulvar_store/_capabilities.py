"""Capability helpers: one reader per declared marker, never scattered ``hasattr`` (F5, M5)."""

from __future__ import annotations

from typing import Any, TypeGuard

from rulvar_store._incremental import IncrementalReadStore
from rulvar_store._protocols import JournalStore, MetaLookupStore
from rulvar_store._records import RunFilter, RunMeta
from rulvar_store.errors import ConfigError

__all__ = [
    "assert_fenced_writes",
    "has_batch_put",
    "has_fenced_writes",
    "has_get_under",
    "has_incremental_read",
    "has_last_ref",
    "has_meta_lookup",
    "has_single_writer_files",
    "read_run_meta",
]


def has_fenced_writes(store: object) -> bool:
    """Return whether ``store`` declares fenced writes (the marker ``is True``)."""
    return getattr(store, "fenced_writes", None) is True


def assert_fenced_writes(journal: object, transcripts: object | None = None) -> None:
    """Require fenced writes on the journal and, when given, the transcript store.

    Raises:
        ConfigError: naming each store that does not declare the marker (X5).
    """
    missing: list[str] = []
    if not has_fenced_writes(journal):
        missing.append(f"journal ({type(journal).__name__})")
    if transcripts is not None and not has_fenced_writes(transcripts):
        missing.append(f"transcripts ({type(transcripts).__name__})")
    if missing:
        raise ConfigError(
            "fenced writes are required but not declared by: "
            + ", ".join(missing)
            + "; a superseded owner could still change these stores"
        )


def has_single_writer_files(store: object) -> bool:
    """Return whether ``store`` declares the file stores' single-writer machinery.

    The marker ``single_writer_files is True`` promises CONTRACT X13: a torn
    journal tail is repaired on the next open, metas and blobs are replaced by
    rename, and a delete is made whole by a synced intent file. The kit's
    file-machinery suite runs only against a journal that declares it.
    """
    return getattr(store, "single_writer_files", None) is True


def has_meta_lookup(store: object) -> TypeGuard[MetaLookupStore]:
    """Return whether ``store`` offers ``get_meta`` (M5)."""
    return callable(getattr(store, "get_meta", None))


def read_run_meta(store: JournalStore, run_id: str) -> RunMeta | None:
    """Return the run's meta through ``get_meta``, or by scanning ``list_runs``."""
    if has_meta_lookup(store):
        return store.get_meta(run_id)
    metas: list[dict[str, Any]] = store.list_runs(RunFilter())
    return next((meta for meta in metas if meta.get("runId") == run_id), None)


def has_incremental_read(store: object) -> TypeGuard[IncrementalReadStore]:
    """Return whether ``store`` offers ``load_since`` (see ``_incremental``)."""
    return callable(getattr(store, "load_since", None))


def has_batch_put(store: object) -> bool:
    """Return whether the blob store ``store`` offers ``put_many`` (see ``_batch``, T11).

    Sync and asyncio stores alike (so a plain ``bool``, not a guard naming one
    of the two protocols, ``BatchTranscriptStore`` or
    ``AsyncBatchTranscriptStore``): the method is the declaration, as for
    ``get_meta`` and ``load_since``; the asyncio adapter offers it only over a
    sync store that does.
    """
    return callable(getattr(store, "put_many", None))


def has_last_ref(store: object) -> bool:
    """Return whether the blob store ``store`` offers ``last_ref`` (see ``_last_ref``, T12).

    Sync and asyncio stores alike, like ``has_batch_put``: the method is the
    declaration, and the asyncio adapter offers it only over a sync store that
    does.
    """
    return callable(getattr(store, "last_ref", None))


def has_get_under(store: object) -> bool:
    """Return whether the blob store ``store`` offers ``get_under`` (see ``_get_under``, T13).

    Sync and asyncio stores alike, like ``has_last_ref``.
    """
    return callable(getattr(store, "get_under", None))
