"""Fenced LangGraph checkpointers over rulvar stores.

``RulvarSaver`` and ``AsyncRulvarSaver`` store each LangGraph thread as one run
of a store that declares leases and fenced writes. ``saver.hold(thread_id)``
owns the thread for one invocation; a superseded holder's checkpoint writes are
refused with ``LeaseHeldError`` and change nothing. ``import_threads`` (and
``aimport_threads``) bring threads of another LangGraph checkpointer in.
"""

from rulvar_langgraph._async import AsyncRulvarSaver
from rulvar_langgraph._core import LEASE_KEY
from rulvar_langgraph._import import aimport_threads, import_threads
from rulvar_langgraph._plans import ThreadGoneError
from rulvar_langgraph._sync import RulvarSaver

__all__ = [
    "LEASE_KEY",
    "AsyncRulvarSaver",
    "RulvarSaver",
    "ThreadGoneError",
    "aimport_threads",
    "import_threads",
]
