"""Fenced LangGraph checkpointers over rulvar stores.

``RulvarSaver`` and ``AsyncRulvarSaver`` store each LangGraph thread as one run
of a store that declares leases and fenced writes. ``saver.hold(thread_id)``
owns the thread for one invocation; a superseded holder's checkpoint writes are
refused with ``LeaseHeldError`` and change nothing. A hold that lost its lease
stops its own work: its writes raise ``LeaseLostError`` before any I/O, nodes
call ``ensure_owned(config)`` before a side effect, and an asyncio hold cancels
its invocation.
"""

from rulvar_langgraph._async import AsyncRulvarSaver
from rulvar_langgraph._core import LEASE_KEY
from rulvar_langgraph._hold import ensure_owned, owned
from rulvar_langgraph._plans import ThreadGoneError
from rulvar_langgraph._sync import RulvarSaver

__all__ = [
    "LEASE_KEY",
    "AsyncRulvarSaver",
    "RulvarSaver",
    "ThreadGoneError",
    "ensure_owned",
    "owned",
]
