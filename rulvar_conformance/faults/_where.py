"""Which backend a location belongs to, read from its URL opener."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rulvar_conformance.harness.kit import not_run
from rulvar_store.backend import StoreLocation, UrlOpener

__all__ = ["location_scheme", "scratch_beside"]


def location_scheme(location: StoreLocation) -> str | None:
    """``"sqlite"``, ``"file"``, ... for a location opened by URL; else ``None``."""
    opener = location.opener
    if isinstance(opener, UrlOpener):
        return opener.url.split(":", 1)[0]
    return None


@contextmanager
def scratch_beside(location: StoreLocation, scheme: str) -> Iterator[Path]:
    """A temporary folder on the location's filesystem; not run for another backend.

    The faults are simulated under the store's files, so the folder sits next to
    the location (the same filesystem the user asked to certify).
    """
    found = location_scheme(location)
    if found != scheme:
        not_run(
            f"this check simulates faults under {scheme}:// files; the location "
            f"is {found or 'not opened by URL'}"
        )
    parent = os.path.dirname(location.name.rstrip(os.sep)) or None
    with tempfile.TemporaryDirectory(prefix="rulvar-fault-", dir=parent) as name:
        yield Path(name)
