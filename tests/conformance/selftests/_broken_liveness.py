"""Broken SQLite stores for the worker-life suite's takeover check (L11).

Spawned children open them by class (``_broken_sqlite.sqlite_locations``), so
they live in a module of their own that a child can import.
"""

from __future__ import annotations

from rulvar_store_sqlite import SqliteStore

__all__ = ["NeverJudgesDead", "StoppedCountsAsDead"]


class NeverJudgesDead(SqliteStore):
    """Records holders but never judges one dead: a crashed worker's run waits a ttl."""

    def _holder_is_dead(self, run_id: str, epoch: int) -> bool:
        return False


class StoppedCountsAsDead(SqliteStore):
    """Judges a holder by its process state: only running or sleeping is alive.

    A plausible shortcut that misjudges a paused (SIGSTOPped, state ``T``)
    worker as dead, and so takes its thread at once.
    """

    def _holder_is_dead(self, run_id: str, epoch: int) -> bool:
        rows = self._cursor.execute(
            "SELECT process FROM rulvar_py_lease_holders WHERE run_id = ? AND epoch = ?",
            (run_id, epoch),
        ).fetchall()
        if not rows:
            return False
        pid = str(rows[0][0]).split("/")[2]
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
                text = stat.read()
        except OSError:
            return True
        state = text[text.rfind(")") + 2 :].split()[0]
        return state not in ("R", "S", "D")
