"""The power of one simulated machine: armed, counted down change by change, then cut.

Both power-loss models (the SQLite VFS in ``_power_vfs`` and the file store's
``FileOps`` layer in ``_file_power``) run the same switch: ``arm(after)`` cuts
the power at the ``after``-th change, ``cut()`` cuts it now, once, freezing
what the disk holds, and every change after that fails. They differ in what a
change is, what the disk image is, and which error a dead disk raises.
"""

from __future__ import annotations

import threading

__all__ = ["PowerSwitch"]


class PowerSwitch:
    """The countdown and the dead flag; a subclass freezes its image in ``_freeze``.

    ``lock`` is reentrant: a change that ends the countdown cuts the power while
    it holds the lock.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._countdown: int | None = None
        self._tear = False
        self.dead = False

    def arm(self, after: int, *, tear: bool) -> None:
        """Cut the power at the ``after``-th change (1 = the next one).

        ``tear``: the cut may land part of what was written since the last sync.
        """
        with self.lock:
            self._countdown, self._tear = after, tear

    def is_dead(self) -> bool:
        """Whether the power was cut (read fresh: another thread may cut it)."""
        return self.dead

    def cut(self) -> None:
        """Cut the power now (idempotent): freeze what the disk holds."""
        with self.lock:
            if self.dead:
                return
            self.dead = True
            self._countdown = None
            self._freeze()

    def _freeze(self) -> None:
        """Record the disk image at the cut; the lock is held."""
        # Abstract: each power-loss model freezes its own image (no ABCMeta, which
        # the apsw.VFS subclass would have to share with a C extension type).
        raise NotImplementedError

    def _restore_power(self) -> None:
        """A fresh boot: alive, not armed. Callers hold the lock."""
        self._countdown = None
        self.dead = False

    def _cut_at_this_change(self) -> bool:
        """Count one change down; True when the power was cut at it (it never happens)."""
        if self._countdown is None:
            return False
        self._countdown -= 1
        if self._countdown > 0:
            return False
        self.cut()
        return True
