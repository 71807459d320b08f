"""What every command group shares: exit codes."""

from __future__ import annotations

from typing import Final

__all__ = [
    "EXIT_CODES_HELP",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "RUNS_EXIT_CODES_HELP",
    "SOAK_EXIT_CODES_HELP",
]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2

EXIT_CODES_HELP: Final = (
    "Exit status: 0 success; 1 a check failed; 2 a usage or configuration "
    "mistake, or a store that cannot be opened or reached (one line on stderr, "
    "never a traceback)."
)

RUNS_EXIT_CODES_HELP: Final = (
    "Exit status: 0 nothing remains; 1 something remains (a divergence not "
    "repaired, a run skipped, unreadable or unknown); 2 a usage or configuration "
    "mistake; 3 the store did not answer within --timeout."
)

SOAK_EXIT_CODES_HELP: Final = (
    "Exit status: 0 no violation; 1 the soak found violations (each listed); "
    "2 a usage or configuration mistake, or a store that cannot be soaked."
)
