"""Records of the SPI: leases, run filters, entry and meta dicts, clock and ttl (D7-D9)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias, TypedDict

from rulvar_store.errors import ConfigError

__all__ = [
    "DEFAULT_LEASE_TTL_MS",
    "MAX_LEASE_TTL_MS",
    "BlobInput",
    "Clock",
    "JournalEntry",
    "Lease",
    "RunFilter",
    "RunMeta",
    "RunMetaDict",
    "finite_seq",
    "meta_matches_filter",
    "system_clock_ms",
    "validate_ttl_ms",
]

JournalEntry: TypeAlias = dict[str, Any]
"""One journal entry. Stores read only ``seq``; every other key is opaque (D4)."""

RunMeta: TypeAlias = dict[str, Any]
"""One run's metadata record; every key, known or not, round-trips exactly (D6)."""

BlobInput: TypeAlias = bytes | bytearray | memoryview
"""What blob stores accept; they copy it at the boundary and return ``bytes`` (D3)."""

Clock: TypeAlias = Callable[[], int]
"""Unix epoch milliseconds (D8)."""

DEFAULT_LEASE_TTL_MS: Final = 60_000
# Kept from the TypeScript timer limit so configurations stay portable (D9).
MAX_LEASE_TTL_MS: Final = 2_147_483_647


class RunMetaDict(TypedDict, total=False):
    """The documented keys of a RunMeta; stores persist unknown keys too."""

    runId: str
    status: str
    updatedAt: str
    name: str
    tags: list[str]
    hashVersionLow: int
    hashVersionHigh: int
    workflowName: str
    workflowHash: str
    workflowSourceRef: str
    budgetUsd: float
    budgetPolicy: str
    maxInFlightExposureUsd: float
    strictPricing: dict[str, Any]
    configFingerprint: str
    scope: dict[str, Any]
    scopeNormalize: dict[str, Any]
    segments: int
    argsProvided: bool
    argsHash: str
    genesis: str
    execKeyDerivation: int


@dataclass(frozen=True, slots=True)
class Lease:
    """Proof of ownership of one run; ``epoch`` is the fencing token."""

    run_id: str
    owner: str
    epoch: int


@dataclass(frozen=True, slots=True)
class RunFilter:
    """What ``list_runs`` narrows to; ``statuses`` is advisory (M4)."""

    status: str | None = None
    statuses: Sequence[str] | None = None
    tags: Sequence[str] | None = None
    name: str | None = None


def meta_matches_filter(meta: RunMeta, run_filter: RunFilter | None) -> bool:
    """Return whether ``meta`` satisfies ``run_filter`` exactly as D7 defines it."""
    if run_filter is None:
        return True
    if run_filter.status is not None or run_filter.statuses is not None:
        status = meta.get("status")
        by_status = run_filter.status is not None and status == run_filter.status
        by_statuses = run_filter.statuses is not None and status in run_filter.statuses
        if not (by_status or by_statuses):
            return False
    if run_filter.name is not None and meta.get("name") != run_filter.name:
        return False
    if run_filter.tags:
        tags = meta.get("tags")
        if not isinstance(tags, list):
            return False
        return all(tag in tags for tag in run_filter.tags)
    return True


def finite_seq(entry: JournalEntry) -> int | float | None:
    """Return the entry's seq if it is a finite number (D5), else ``None``.

    ``bool`` is excluded on purpose: ``True`` is an ``int`` in Python but not a seq.
    """
    seq = entry.get("seq")
    if isinstance(seq, bool) or not isinstance(seq, int | float):
        return None
    if isinstance(seq, float) and not math.isfinite(seq):
        return None
    return seq


def validate_ttl_ms(ttl_ms: object) -> int:
    """Return ``ttl_ms`` if it is a valid lease ttl (D9).

    Raises:
        ConfigError: not an int, a bool, or outside 1..2_147_483_647.
    """
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int):
        raise ConfigError(f"ttl_ms must be an int, got {type(ttl_ms).__name__}")
    if not 1 <= ttl_ms <= MAX_LEASE_TTL_MS:
        raise ConfigError(
            f"ttl_ms must be between 1 and {MAX_LEASE_TTL_MS}, got {ttl_ms}: "
            "a lease of zero or negative length would be born expired"
        )
    return ttl_ms


def system_clock_ms() -> int:
    """The wall clock in Unix epoch milliseconds, the default lease clock (D8)."""
    return time.time_ns() // 1_000_000
