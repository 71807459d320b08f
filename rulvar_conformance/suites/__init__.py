"""The suites: what a certification checks, one module per suite.

Each registered module defines ``SPEC``, a ``SuiteSpec`` built from one
``Certification``. ``REGISTERED`` lists them in the order certification runs
them: to add a suite, add its module here on a line of its own. Modules with a
leading underscore hold helpers of the suites beside them; ``cancellation`` and
``loop_health`` are run by the asyncio path's certification, not by this
registry; ``langgraph_ownership`` is part of the ``langgraph`` suite.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from rulvar_conformance.harness.certification import SuiteSpec

__all__ = ["REGISTERED", "registered_specs"]

REGISTERED: Final = (
    "journal",
    "leasable",
    "fenced_writes",
    "fenced_transcripts",
    "two_handles",
    "forced_races",
    "thread_races",
    "shared_handle",
    "typed_errors",
    "stale_surfaces",
    "lease_lifetime",
    "worker_life",
    "server_clock",
    "pool_fairness",
    "forgotten_statements",
    "data_edges",
    "argument_rules",
    "stalled_link",
    "next_op_sees",
    "incremental_reads",
    "operator_tools",
    "moving",
    "durability",
    "first_opens",
    "file_machinery",
    "replaced_file",
    "queued_writes",
    "kill_points",
    "power_loss",
    "disk_faults",
    "langgraph",
)


def registered_specs() -> tuple[SuiteSpec, ...]:
    """The ``SPEC`` of every registered suite module, in registry order."""
    return tuple(import_module(f"{__name__}.{module}").SPEC for module in REGISTERED)
