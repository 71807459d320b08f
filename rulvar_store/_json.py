"""Canonical JSON in one place: what stores persist (D1-D3) and what the kit hashes (C3)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["dump_record", "load_record", "stable_stringify"]


def dump_record(value: Any) -> str:
    """Serialize an entry or meta record before anything becomes durable (D2).

    Key order is kept exactly as given (D4: no reordering). NaN, Infinity and
    non-JSON values raise ``ValueError``/``TypeError`` so nothing is persisted.
    """
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def load_record(text: str | bytes) -> Any:
    """Parse stored text into a fresh object, so callers never share state (D3)."""
    return json.loads(text)


def stable_stringify(value: Any) -> str:
    """Canonical JSON for equality and hashing (C3): sorted keys, compact, UTF-8 text."""
    return json.dumps(
        value,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
