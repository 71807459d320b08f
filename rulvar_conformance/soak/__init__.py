"""The multi-process soak (CONTRACT section 10): writer, referee, runner, boot storm.

``run_multi_process_soak(location, ...)`` storms one ``StoreLocation`` with real
writer processes, pauses and kills them from outside, and checks the history
they logged against the store's final state with ``verify_soak_history``.
"""

from rulvar_conformance.soak.config import DEFAULT_SOAK_RUNS, SoakWriterConfig
from rulvar_conformance.soak.events import Event, ListSink
from rulvar_conformance.soak.referee import RefereeVerdict, referee_history, verify_soak_history
from rulvar_conformance.soak.runner import ChaosPlan, SoakFailure, SoakResult, run_multi_process_soak
from rulvar_conformance.soak.tally import DEFAULT_SOAK_QUORUM, SoakQuorum
from rulvar_conformance.soak.writer import SoakHooks, run_soak_writer

__all__ = [
    "DEFAULT_SOAK_QUORUM",
    "DEFAULT_SOAK_RUNS",
    "ChaosPlan",
    "Event",
    "ListSink",
    "RefereeVerdict",
    "SoakFailure",
    "SoakHooks",
    "SoakQuorum",
    "SoakResult",
    "SoakWriterConfig",
    "referee_history",
    "run_multi_process_soak",
    "run_soak_writer",
    "verify_soak_history",
]
