"""What every command group shares: exit codes."""

from __future__ import annotations

from typing import Final

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE"]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
