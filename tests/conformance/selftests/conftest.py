"""Self-tests of the race, two-handle and typed-error checks (C4).

tests/ is no package and pytest runs with --import-mode=importlib, so the project
root goes on sys.path: the modules here import their broken stores by the dotted
name mypy gives them (``tests.conformance.selftests._broken_sqlite``).
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[3])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
