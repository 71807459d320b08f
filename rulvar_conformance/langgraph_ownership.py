"""Old home of the LangGraph ownership suite, kept one release: it warns on import.

The suite moved to ``rulvar_conformance.suites.langgraph_ownership`` with the
other suites.
"""

import warnings

from rulvar_conformance.suites.langgraph_ownership import (
    LG_TTL_MS,
    langgraph_ownership_conformance,
)

__all__ = ["LG_TTL_MS", "langgraph_ownership_conformance"]

warnings.warn(
    "rulvar_conformance.langgraph_ownership moved to "
    "rulvar_conformance.suites.langgraph_ownership; the old path goes away in 0.3",
    DeprecationWarning,
    stacklevel=2,
)
