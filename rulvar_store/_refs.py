"""Blob refs and safe names for file-backed stores (T3, T8, T9)."""

from __future__ import annotations

import re
from typing import Final

from rulvar_store.errors import ContractError, UnsafeNameError

__all__ = [
    "MAX_SAFE_TOKEN_LENGTH",
    "check_safe_token",
    "copy_blob",
    "is_safe_token",
    "ref_run_id",
]

MAX_SAFE_TOKEN_LENGTH: Final = 200
_SAFE_TOKEN: Final = re.compile(r"[A-Za-z0-9._-]+")


def ref_run_id(ref: str) -> str:
    """Return the run a blob ref belongs to: its leading segment (T3)."""
    return ref.split("/", 1)[0]


def is_safe_token(name: str) -> bool:
    """Return whether ``name`` may become one path segment on disk (T9)."""
    return (
        isinstance(name, str)
        and 0 < len(name) <= MAX_SAFE_TOKEN_LENGTH
        and name not in (".", "..")
        and _SAFE_TOKEN.fullmatch(name) is not None
    )


def check_safe_token(
    name: str, what: str, operation: str = "file store", argument: str = "run_id"
) -> str:
    """Return ``name`` if it is a safe token.

    Raises:
        UnsafeNameError: (a ``JournalOrderViolation`` and an
            ``InvalidArgumentError``) the name is empty, ``.``/``..``, too long,
            or has characters outside ``[A-Za-z0-9._-]``; nothing was touched on
            disk.
    """
    if not is_safe_token(name):
        shown = name[:60] + "..." if isinstance(name, str) and len(name) > 60 else name
        raise UnsafeNameError(
            f"{operation}: {argument}: unsafe {what} {shown!r}: file stores take "
            f"1-{MAX_SAFE_TOKEN_LENGTH} characters from [A-Za-z0-9._-], not '.' or '..'",
            operation,
            argument,
        )
    return name


def copy_blob(blob: object) -> bytes:
    """Return an immutable copy of bytes-like input (D3).

    Raises:
        ContractError: ``blob`` is not ``bytes``, ``bytearray`` or ``memoryview``.
    """
    if not isinstance(blob, bytes | bytearray | memoryview):
        raise ContractError(
            f"a blob must be bytes, bytearray or memoryview, got {type(blob).__name__}"
        )
    return bytes(blob)
