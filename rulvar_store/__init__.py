"""rulvar stores: the store SPI, reference stores and the backend registry.

A run's durable state is a journal of entries, one metadata record and a set of
blobs. Leases carry a fencing epoch; a store that declares ``fenced_writes``
refuses every write of a superseded owner (CONTRACT.md sections 1-5).
"""

from rulvar_store._audit import (
    RUN_STATUSES,
    TERMINAL_RUN_STATUSES,
    SettleRef,
    last_run_settle,
)
from rulvar_store._capabilities import (
    assert_fenced_writes,
    has_fenced_writes,
    has_incremental_read,
    has_meta_lookup,
    read_run_meta,
)
from rulvar_store._failpoints import FAILPOINTS, Failpoint, hit, set_failpoint_hook
from rulvar_store._file_journal import CorruptFileError, JsonlFileStore, TornTail
from rulvar_store._file_transcripts import FileTranscriptStore
from rulvar_store._incremental import IncrementalReadStore, JournalTail
from rulvar_store._json import dump_record, load_record, stable_stringify
from rulvar_store._locations import (
    LOCATION_FEATURES,
    LocationFactory,
    LocationOpener,
    StoreLocation,
    UrlOpener,
    locations_from_factory,
    opened_at,
)
from rulvar_store._memory import (
    MemoryFencedTranscriptStore,
    MemoryStore,
    MemoryTranscriptStore,
)
from rulvar_store._plugins import (
    ENTRY_POINT_GROUP,
    Backend,
    BackendInfo,
    FreshStoreFactory,
    OpenedStore,
    hookimpl,
    list_backends,
    make_plugin_manager,
    open_store,
)
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
    finite_seq,
    meta_matches_filter,
    system_clock_ms,
    validate_ttl_ms,
)
from rulvar_store._refs import check_safe_token, copy_blob, is_safe_token, ref_run_id
from rulvar_store._urls import StoreUrl, option_bool, option_int, redact_url
from rulvar_store.errors import (
    ConfigError,
    ContractError,
    JournalOrderViolation,
    LeaseHeldError,
    RulvarError,
    SettlementError,
    StoreBusyError,
    StoreUnavailableError,
    SupersededError,
)

__all__ = [
    "DEFAULT_LEASE_TTL_MS",
    "ENTRY_POINT_GROUP",
    "FAILPOINTS",
    "LOCATION_FEATURES",
    "MAX_LEASE_TTL_MS",
    "RUN_STATUSES",
    "TERMINAL_RUN_STATUSES",
    "Backend",
    "BackendInfo",
    "BlobInput",
    "Clock",
    "ConfigError",
    "ContractError",
    "CorruptFileError",
    "Failpoint",
    "FileTranscriptStore",
    "FreshStoreFactory",
    "IncrementalReadStore",
    "JournalEntry",
    "JournalOrderViolation",
    "JournalStore",
    "JournalTail",
    "JsonlFileStore",
    "LeasableStore",
    "Lease",
    "LeaseHeldError",
    "LocationFactory",
    "LocationOpener",
    "MemoryFencedTranscriptStore",
    "MemoryStore",
    "MemoryTranscriptStore",
    "MetaLookupStore",
    "OpenedStore",
    "RulvarError",
    "RunFilter",
    "RunMeta",
    "RunMetaDict",
    "SettleRef",
    "SettlementError",
    "StoreBusyError",
    "StoreLocation",
    "StoreUnavailableError",
    "StoreUrl",
    "SupersededError",
    "TornTail",
    "TranscriptStore",
    "UrlOpener",
    "assert_fenced_writes",
    "check_safe_token",
    "copy_blob",
    "dump_record",
    "finite_seq",
    "has_fenced_writes",
    "has_incremental_read",
    "has_meta_lookup",
    "hit",
    "hookimpl",
    "is_safe_token",
    "last_run_settle",
    "list_backends",
    "load_record",
    "locations_from_factory",
    "make_plugin_manager",
    "meta_matches_filter",
    "open_store",
    "opened_at",
    "option_bool",
    "option_int",
    "read_run_meta",
    "redact_url",
    "ref_run_id",
    "set_failpoint_hook",
    "stable_stringify",
    "system_clock_ms",
    "validate_ttl_ms",
]
