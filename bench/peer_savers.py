"""Whether LangGraph's own checkpoint savers are installed: the benches that measure ours beside them.

They are an optional benchmark dependency (the ``bench`` extra), never a runtime
one, and ``pip install -e '.[dev]'`` does not bring them.
"""

from __future__ import annotations

import sys
from typing import Final

INSTALL_HINT: Final = (
    "LangGraph savers not installed: pip install 'rulvar-stores[bench]' "
    "(langgraph-checkpoint-sqlite, langgraph-checkpoint-postgres)"
)


def langgraph_available() -> bool:
    """Whether both of LangGraph's SQL savers import."""
    try:
        import langgraph.checkpoint.postgres
        import langgraph.checkpoint.sqlite  # noqa: F401
    except ImportError:
        return False
    return True


def require_langgraph_savers() -> None:
    """Exit 2 with the install hint, before any work, when the savers are missing."""
    if not langgraph_available():
        print(INSTALL_HINT, file=sys.stderr)
        raise SystemExit(2)
