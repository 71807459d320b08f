"""Fenced LangGraph checkpointers over rulvar stores.

``RulvarSaver`` and ``AsyncRulvarSaver`` store each LangGraph thread as one run
of a store that declares leases and fenced writes. ``saver.hold(thread_id)``
owns the thread for one invocation; a superseded holder's checkpoint writes are
refused with ``LeaseHeldError`` and change nothing. A hold that lost its lease
stops its own work: its writes raise ``LeaseLostError`` before any I/O, nodes
call ``ensure_owned(config)`` before a side effect, and an asyncio hold cancels
its invocation. ``import_threads`` (and ``aimport_threads``) bring threads of
another LangGraph checkpointer in.
"""

from rulvar_store.errors import MissingExtraError

try:
    from rulvar_langgraph._async import AsyncRulvarSaver
    from rulvar_langgraph._core import LEASE_KEY
    from rulvar_langgraph._hold import ensure_owned, owned
    from rulvar_langgraph._import import aimport_threads, import_threads
    from rulvar_langgraph._plans import ThreadGoneError
    from rulvar_langgraph._sync import RulvarSaver
except ModuleNotFoundError as exc:
    # langgraph-checkpoint and what it brings (langchain-core, ormsgpack).
    extra_modules = ("langgraph", "langchain_core", "ormsgpack")
    if exc.name is None or exc.name.split(".")[0] not in extra_modules:
        raise
    # As open_store says a missing extra: which one, not a bare module name.
    raise MissingExtraError(
        f"rulvar_langgraph needs {exc.name}, which is not installed: pip install "
        "'rulvar-stores[langgraph]' (in a checkout: pip install -e '.[langgraph]')",
        exc.name,
    ) from None

__all__ = [
    "LEASE_KEY",
    "AsyncRulvarSaver",
    "RulvarSaver",
    "ThreadGoneError",
    "aimport_threads",
    "ensure_owned",
    "import_threads",
    "owned",
]
