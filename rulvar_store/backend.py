"""The public module for backend and location authors.

What a plugin needs to build a store that certifies: the ``Backend`` descriptor
and ``hookimpl`` marker, URL and option parsing, the location family the kit and
the soak open stores through, the argument rules every store applies before any
storage work (``rulvar_store/_intake.py``: wrong types become
``InvalidArgumentError``), the run-match and live-lease refusals, cursor parsing,
the JSON codecs, the moved-run tombstone (``refuse_if_moved``), the failpoints the kill points drive, and the pieces every
async handle shares (``AsyncClosing``, ``finish_uncancelled``, ``wait_out``,
and ``HopThreads``, the threads a store's calls hop to).

Store users import from ``rulvar_store``; operators from ``rulvar_store.ops``.
"""

from rulvar_store._async_adapter import adapt_opened
from rulvar_store._async_closing import AsyncClosing, finish_uncancelled, wait_out
from rulvar_store._batch import CheckedBatch, blob_batch
from rulvar_store._brief_put import BriefPutArgs, brief_put_args
from rulvar_store._call_kinds import CallKind, argument
from rulvar_store._capabilities import (
    has_get_under,
    has_last_ref,
    has_single_writer_files,
)
from rulvar_store._durability import (
    DurabilityReport,
    ReportsDurability,
    reports_durability,
)
from rulvar_store._failpoints import (
    FAILPOINTS,
    Failpoint,
    FailpointHook,
    armed,
    caller_identity,
    hit,
    mark_caller,
    marked_caller,
    set_failpoint_hook,
)
from rulvar_store._file_ops import FileOps, file_ops_layer
from rulvar_store._fork import ForkGuard, fork_generation
from rulvar_store._get_under import (
    AsyncGetUnderTranscriptStore,
    GetUnderTranscriptStore,
    blobs_under,
    get_under_args,
)
from rulvar_store._hop_threads import HopThreads
from rulvar_store._incremental import parse_cursor
from rulvar_store._instrument import instrument_calls, instrumented, uncounted
from rulvar_store._intake import (
    MAX_BLOB_BYTES,
    MAX_DEPTH,
    MAX_OWNER_LENGTH,
    MAX_RECORD_BYTES,
    MAX_REF_LENGTH,
    MAX_RUN_ID_LENGTH,
    blob_bytes,
    entry_text,
    lease_or_none,
    meta_run_id,
    meta_text,
    numeric_seq,
    owner_for_write,
    ref_for_read,
    ref_for_write,
    require_lease,
    require_str,
    run_filter,
    run_id_for_read,
    run_id_for_write,
    text_for_read,
)
from rulvar_store._json import (
    dump_record,
    load_listing,
    load_record,
    load_records,
    stable_stringify,
)
from rulvar_store._last_ref import (
    AsyncLastRefTranscriptStore,
    LastRefTranscriptStore,
    last_ref_args,
    last_ref_of,
    prefix_upper_bound,
)
from rulvar_store._liveness import holder_is_dead, this_process
from rulvar_store._location_records import (
    LOCATION_FEATURES,
    FreshStoreFactory,
    LocationFactory,
    LocationOpener,
    NetworkRoute,
    StoreLocation,
)
from rulvar_store._locations import UrlOpener, locations_from_factory, opened_at
from rulvar_store._move_conflict import copy_blobs, copy_conflict, distinct_runs
from rulvar_store._moved import (
    MOVED_OWNER_PREFIX,
    NEVER_EXPIRES_MS,
    moved_destination,
    moved_owner,
    refuse_if_moved,
)
from rulvar_store._plugins import (
    CAPABILITIES,
    ENTRY_POINT_GROUP,
    Backend,
    hookimpl,
    hookspec,
    install_hint,
    make_plugin_manager,
    resolve_backend,
)
from rulvar_store._records import (
    finite_seq,
    meta_matches_filter,
    system_clock_ms,
    validate_ttl_ms,
)
from rulvar_store._refs import (
    MAX_SAFE_TOKEN_LENGTH,
    check_safe_token,
    copy_blob,
    is_safe_token,
    ref_run_id,
)
from rulvar_store._run_match import check_run_match, held_by, not_live_lease
from rulvar_store._telemetry import (
    Observed,
    TelemetryTarget,
    batch_recorder,
    telemetry_target,
)
from rulvar_store._telemetry import (
    note as note_telemetry,
)
from rulvar_store._urls import (
    StoreUrl,
    option_bool,
    option_int,
    parse_store_url,
    redact_url,
)

__all__ = [
    "CAPABILITIES",
    "ENTRY_POINT_GROUP",
    "FAILPOINTS",
    "LOCATION_FEATURES",
    "MAX_BLOB_BYTES",
    "MAX_DEPTH",
    "MAX_OWNER_LENGTH",
    "MAX_RECORD_BYTES",
    "MAX_REF_LENGTH",
    "MAX_RUN_ID_LENGTH",
    "MAX_SAFE_TOKEN_LENGTH",
    "MOVED_OWNER_PREFIX",
    "NEVER_EXPIRES_MS",
    "AsyncClosing",
    "AsyncGetUnderTranscriptStore",
    "AsyncLastRefTranscriptStore",
    "Backend",
    "BriefPutArgs",
    "CallKind",
    "CheckedBatch",
    "DurabilityReport",
    "Failpoint",
    "FailpointHook",
    "FileOps",
    "ForkGuard",
    "FreshStoreFactory",
    "GetUnderTranscriptStore",
    "HopThreads",
    "LastRefTranscriptStore",
    "LocationFactory",
    "LocationOpener",
    "NetworkRoute",
    "Observed",
    "ReportsDurability",
    "StoreLocation",
    "StoreUrl",
    "TelemetryTarget",
    "UrlOpener",
    "adapt_opened",
    "argument",
    "armed",
    "batch_recorder",
    "blob_batch",
    "blob_bytes",
    "blobs_under",
    "brief_put_args",
    "caller_identity",
    "check_run_match",
    "check_safe_token",
    "copy_blob",
    "copy_blobs",
    "copy_conflict",
    "distinct_runs",
    "dump_record",
    "entry_text",
    "file_ops_layer",
    "finish_uncancelled",
    "finite_seq",
    "fork_generation",
    "get_under_args",
    "has_get_under",
    "has_last_ref",
    "has_single_writer_files",
    "held_by",
    "hit",
    "holder_is_dead",
    "hookimpl",
    "hookspec",
    "install_hint",
    "instrument_calls",
    "instrumented",
    "is_safe_token",
    "last_ref_args",
    "last_ref_of",
    "lease_or_none",
    "load_listing",
    "load_record",
    "load_records",
    "locations_from_factory",
    "make_plugin_manager",
    "mark_caller",
    "marked_caller",
    "meta_matches_filter",
    "meta_run_id",
    "meta_text",
    "moved_destination",
    "moved_owner",
    "not_live_lease",
    "note_telemetry",
    "numeric_seq",
    "opened_at",
    "option_bool",
    "option_int",
    "owner_for_write",
    "parse_cursor",
    "parse_store_url",
    "prefix_upper_bound",
    "redact_url",
    "ref_for_read",
    "ref_for_write",
    "ref_run_id",
    "refuse_if_moved",
    "reports_durability",
    "require_lease",
    "require_str",
    "resolve_backend",
    "run_filter",
    "run_id_for_read",
    "run_id_for_write",
    "set_failpoint_hook",
    "stable_stringify",
    "system_clock_ms",
    "telemetry_target",
    "text_for_read",
    "this_process",
    "uncounted",
    "validate_ttl_ms",
    "wait_out",
]
