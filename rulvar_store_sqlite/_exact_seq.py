"""Exact seq comparison for the J6 guard where SQLite's own numbers round.

The format stores each entry as JSON text (Appendix S); SQLite's JSON functions
read an integer beyond int64 as a REAL, and a bound Python int beyond int64 can
only be bound as a float, so ``2**63 + 1`` and ``2**63`` compare equal as
doubles and the guard refused an append memory and PostgreSQL accept (issue 21
item 10). The format itself stays as it is: the reference implementation
writes JavaScript numbers (doubles), which both readers see alike.

The guard keeps SQLite's numeric comparison wherever it is exact (two doubles
that differ order their exact values the same way, since rounding to the
nearest double is monotonic) and asks ``rulvar_py_seq_at_least`` only when the
two doubles are equal. The function compares the stored number's original JSON
text (``payload -> '$.seq'``) with the new seq's exact text as Python reads
them (an integer literal exactly, a literal with a fraction or exponent as the
float ``json.loads`` makes of it), through ``Decimal``, which has no digit limit
and compares ints and floats exactly.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Final

import apsw

__all__ = ["SEQ_AT_LEAST", "register_seq_functions", "seq_at_least", "seq_text"]

SEQ_AT_LEAST: Final = "rulvar_py_seq_at_least"


def _number(text: str) -> Decimal:
    """The exact value Python's JSON reader gives the number literal ``text``."""
    if any(mark in text for mark in ".eE"):
        return Decimal(float(text))  # json.loads reads it as a float (1e400: inf)
    return Decimal(text)


def seq_at_least(*texts: apsw.SQLiteValue) -> bool:
    """Whether the stored seq (its JSON text) is at least the new seq (its exact text).

    Called by SQLite with ``(stored, new)``.
    """
    stored, new = texts
    if not isinstance(stored, str) or not isinstance(new, str):
        return False  # no number on one side: not a seq (D5)
    return _number(stored) >= _number(new)


def seq_text(seq: int | float) -> str:
    """The new seq's exact text (a float's repr reads back as the same float)."""
    return repr(seq)


def register_seq_functions(connection: apsw.Connection) -> None:
    """Make the guard's function known to ``connection`` (every store connection)."""
    connection.create_scalar_function(SEQ_AT_LEAST, seq_at_least, 2, deterministic=True)
