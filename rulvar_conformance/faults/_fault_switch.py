"""Which disk fault is on, for which operations: the state both disk-fault layers share.

The SQLite VFS (``_disk_vfs``) and the file store's ``FileOps`` layer
(``_file_layer``) fail the same operations the same way; they differ only in the
error their backend's disk calls raise, so each turns ``tripped(op)`` into its own.
"""

from __future__ import annotations

import threading

from rulvar_conformance.faults.disk_runs import DiskFault

__all__ = ["FaultSwitch"]


class FaultSwitch:
    """``fail(kind, ops)`` turns a fault on for ``ops`` until ``heal()``.

    ``failed`` counts the operations that met the fault. Safe across threads: the
    store's writers ask while the check flips the switch.
    """

    def __init__(self) -> None:
        self._switch_lock = threading.Lock()
        self._kind: DiskFault | None = None
        self._ops: frozenset[str] = frozenset()
        self.failed = 0

    def fail(self, kind: DiskFault, ops: frozenset[str]) -> None:
        """From now on every ``ops`` operation fails with ``kind``."""
        with self._switch_lock:
            self._kind, self._ops = kind, ops

    def heal(self) -> None:
        """Space is back, the disk answers again."""
        with self._switch_lock:
            self._kind, self._ops = None, frozenset()

    def tripped(self, op: str) -> DiskFault | None:
        """The fault ``op`` meets now (and counts it), or None when it goes through."""
        with self._switch_lock:
            if self._kind is None or op not in self._ops:
                return None
            self.failed += 1
            return self._kind
