"""Model-based tests: the project root on sys.path, and the hypothesis profiles.

pytest runs with --import-mode=importlib and tests/ is no package, so the project
root goes on sys.path: test modules import the shared machine by the dotted name
mypy gives it (``tests.stateful._machine``). Importing it here registers the
profiles ``ci`` (100 examples x 30 steps) and ``long`` (1,000 x 50); select with
``RULVAR_HYPOTHESIS_PROFILE=long``, or with
``pytest tests/stateful --hypothesis-profile=long`` (hypothesis reads that option
before collection, so this conftest must be loaded early: name the path).
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import tests.stateful._machine  # noqa: E402, F401  (registers the profiles)
