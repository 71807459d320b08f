"""Registers the postgres backend (filled in by its own issue; no backends yet)."""

from __future__ import annotations

from collections.abc import Sequence

from rulvar_store import Backend, hookimpl

__all__ = ["rulvar_store_backends"]


@hookimpl
def rulvar_store_backends() -> Sequence[Backend]:
    return []
