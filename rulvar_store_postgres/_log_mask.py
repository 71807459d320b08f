"""Passwords never reach a log line: psycopg's and psycopg_pool's records are masked.

psycopg_pool logs every failed connection attempt with the driver's message
(``error connecting in 'pool': ...``) and psycopg logs attempts at debug level.
Those messages come from libpq and quote what it parsed (a host, a database
name), so a password that libpq misread would be printed by the application's
own handlers. Every store registers the password texts of its URL here, and a
filter on both loggers replaces them with ``***`` in each record before any
handler formats it. The texts stay registered for the life of the process (a
store's settings hold them anyway); a set of strings costs nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Final

__all__ = ["mask_in_logs", "masked"]

_LOGGERS: Final = ("psycopg", "psycopg.pool")
_lock = threading.Lock()
_secrets: frozenset[str] = frozenset()


def masked(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every non-empty secret replaced by ``***``, longest first.

    Longest first, so a secret that contains another is masked whole.
    """
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


class _MaskSecrets(logging.Filter):
    """Rewrite a record's message with the registered secrets masked."""

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = _secrets
        if secrets:
            message = record.getMessage()
            cleaned = masked(message, secrets)
            if cleaned != message:
                record.msg, record.args = cleaned, None
        return True


def mask_in_logs(secrets: Iterable[str]) -> None:
    """Mask ``secrets`` in every later record of psycopg's and the pool's loggers."""
    global _secrets
    fresh = frozenset(s for s in secrets if s)
    if not fresh:
        return
    with _lock:
        _secrets = _secrets | fresh
        for name in _LOGGERS:
            logger = logging.getLogger(name)
            if not any(isinstance(f, _MaskSecrets) for f in logger.filters):
                logger.addFilter(_MaskSecrets())
