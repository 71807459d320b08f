"""rulvar stores: the store SPI, reference stores and the backend registry.

A run's durable state is a journal of entries, one metadata record and a set of
blobs. Leases carry a fencing epoch; a store that declares ``fenced_writes``
refuses every write of a superseded owner (CONTRACT.md sections 1-5).

Three public modules, one per audience, each name in exactly one of them:

- ``rulvar_store`` (this module): store users. Open a store by URL, the records,
  the errors, the protocols, the capability helpers and the reference stores.
- ``rulvar_store.backend``: backend and location authors (``Backend``,
  ``hookimpl``, URL parsing, locations, argument rules, cursors, failpoints).
- ``rulvar_store.ops``: operators (audit, reconcile, retention, listing, the fold).

Every other module is private and may change without notice.
"""

import warnings
from typing import Any

from rulvar_store._async_open import AsyncStoreOpening, open_store_async
from rulvar_store._async_protocols import (
    AsyncIncrementalReadStore,
    AsyncJournalStore,
    AsyncLeasableStore,
    AsyncMetaLookupStore,
    AsyncOpenedStore,
    AsyncTranscriptStore,
    is_async_store,
)
from rulvar_store._batch import (
    AsyncBatchTranscriptStore,
    BatchTranscriptStore,
    BlobBatch,
)
from rulvar_store._capabilities import (
    assert_fenced_writes,
    has_batch_put,
    has_fenced_writes,
    has_incremental_read,
    has_meta_lookup,
    read_run_meta,
)
from rulvar_store._file_journal import CorruptFileError, JsonlFileStore, TornTail
from rulvar_store._file_transcripts import FileTranscriptStore
from rulvar_store._incremental import IncrementalReadStore, JournalTail
from rulvar_store._location_records import OpenedStore
from rulvar_store._memory import (
    MemoryFencedTranscriptStore,
    MemoryStore,
    MemoryTranscriptStore,
)
from rulvar_store._plugins import BackendInfo, list_backends, open_store
from rulvar_store._protocols import (
    JournalStore,
    LeasableStore,
    MetaLookupStore,
    TranscriptStore,
)
from rulvar_store._records import (
    DEFAULT_LEASE_TTL_MS,
    MAX_LEASE_TTL_MS,
    BlobInput,
    Clock,
    JournalEntry,
    Lease,
    RunFilter,
    RunMeta,
    RunMetaDict,
)
from rulvar_store.errors import (
    ConfigError,
    ContractError,
    ForkedStoreError,
    InvalidArgumentError,
    JournalOrderViolation,
    LeaseHeldError,
    LeaseRunMismatchError,
    NotJsonError,
    RulvarError,
    SettlementError,
    StoreBusyError,
    StoreClosedError,
    StoreUnavailableError,
    SupersededError,
    UnreadableRecordError,
    UnsafeNameError,
)

__all__ = [
    "DEFAULT_LEASE_TTL_MS",
    "MAX_LEASE_TTL_MS",
    "AsyncBatchTranscriptStore",
    "AsyncIncrementalReadStore",
    "AsyncJournalStore",
    "AsyncLeasableStore",
    "AsyncMetaLookupStore",
    "AsyncOpenedStore",
    "AsyncStoreOpening",
    "AsyncTranscriptStore",
    "BackendInfo",
    "BatchTranscriptStore",
    "BlobBatch",
    "BlobInput",
    "Clock",
    "ConfigError",
    "ContractError",
    "CorruptFileError",
    "FileTranscriptStore",
    "ForkedStoreError",
    "IncrementalReadStore",
    "InvalidArgumentError",
    "JournalEntry",
    "JournalOrderViolation",
    "JournalStore",
    "JournalTail",
    "JsonlFileStore",
    "LeasableStore",
    "Lease",
    "LeaseHeldError",
    "LeaseRunMismatchError",
    "MemoryFencedTranscriptStore",
    "MemoryStore",
    "MemoryTranscriptStore",
    "MetaLookupStore",
    "NotJsonError",
    "OpenedStore",
    "RulvarError",
    "RunFilter",
    "RunMeta",
    "RunMetaDict",
    "SettlementError",
    "StoreBusyError",
    "StoreClosedError",
    "StoreUnavailableError",
    "SupersededError",
    "TornTail",
    "TranscriptStore",
    "UnreadableRecordError",
    "UnsafeNameError",
    "assert_fenced_writes",
    "has_batch_put",
    "has_fenced_writes",
    "has_incremental_read",
    "has_meta_lookup",
    "is_async_store",
    "list_backends",
    "open_store",
    "open_store_async",
    "read_run_meta",
]

# Names that left ``__all__`` in 0.2 for the module of their audience. They stay
# importable from here for one release, with a DeprecationWarning naming the new home.
_MOVED: dict[str, str] = {
    **dict.fromkeys(
        (
            "ENTRY_POINT_GROUP",
            "FAILPOINTS",
            "LOCATION_FEATURES",
            "Backend",
            "Failpoint",
            "FreshStoreFactory",
            "LocationFactory",
            "LocationOpener",
            "StoreLocation",
            "StoreUrl",
            "UrlOpener",
            "check_safe_token",
            "copy_blob",
            "dump_record",
            "finite_seq",
            "hit",
            "hookimpl",
            "is_safe_token",
            "load_record",
            "locations_from_factory",
            "make_plugin_manager",
            "meta_matches_filter",
            "opened_at",
            "option_bool",
            "option_int",
            "redact_url",
            "ref_run_id",
            "set_failpoint_hook",
            "stable_stringify",
            "system_clock_ms",
            "validate_ttl_ms",
        ),
        "rulvar_store.backend",
    ),
    **dict.fromkeys(
        (
            "RUN_STATUSES",
            "TERMINAL_RUN_STATUSES",
            "LeaseState",
            "ListedRun",
            "ReconcileResult",
            "RunStateAudit",
            "SettleRef",
            "SweepOutcome",
            "audit_run",
            "audit_runs",
            "delete_run",
            "has_lease_peek",
            "has_meta_pages",
            "iter_listed_runs",
            "iter_run_audits",
            "last_run_settle",
            "prune_run",
            "reconcile_run_meta",
            "sweep_runs",
        ),
        "rulvar_store.ops",
    ),
}


def __getattr__(name: str) -> Any:
    """Serve a moved name from its new home, warning that the old path goes away."""
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module 'rulvar_store' has no attribute {name!r}")
    warnings.warn(
        f"rulvar_store.{name} moved to {home}.{name}; the old path goes away "
        "in the next release",
        DeprecationWarning,
        stacklevel=2,
    )
    import importlib

    return getattr(importlib.import_module(home), name)
