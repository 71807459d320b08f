"""The multi-process soak (CONTRACT section 10): writer, referee, runner, boot storm.

``run_multi_process_soak(location, ...)`` storms one ``StoreLocation`` with real
writer processes, pauses and kills them from outside, and checks the history
they logged against the store's final state with ``verify_soak_history``.

Names are imported lazily: the writer runs as ``python -m
rulvar_conformance.soak.writer``, and importing it from here first would load it
twice (once as a package member, once as ``__main__``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rulvar_conformance.soak.boot_storm import BootStormResult, run_boot_storm
    from rulvar_conformance.soak.config import (
        DEFAULT_SOAK_RUNS,
        SoakHooks,
        SoakWriterConfig,
    )
    from rulvar_conformance.soak.events import Event, ListSink
    from rulvar_conformance.soak.profiles import PROFILES, SoakProfile, profile_named
    from rulvar_conformance.soak.referee import (
        RefereeVerdict,
        referee_history,
        verify_soak_history,
    )
    from rulvar_conformance.soak.runner import (
        ChaosPlan,
        SoakFailure,
        SoakResult,
        run_multi_process_soak,
    )
    from rulvar_conformance.soak.summary import SoakActivity, SoakHealth, SoakSummary
    from rulvar_conformance.soak.tally import DEFAULT_SOAK_QUORUM, SoakQuorum
    from rulvar_conformance.soak.violations import Violation
    from rulvar_conformance.soak.writer import run_soak_writer

_HOMES = {
    "BootStormResult": "boot_storm",
    "ChaosPlan": "runner",
    "DEFAULT_SOAK_QUORUM": "tally",
    "DEFAULT_SOAK_RUNS": "config",
    "Event": "events",
    "ListSink": "events",
    "PROFILES": "profiles",
    "RefereeVerdict": "referee",
    "SoakActivity": "summary",
    "SoakFailure": "runner",
    "SoakHealth": "summary",
    "SoakHooks": "config",
    "SoakProfile": "profiles",
    "SoakQuorum": "tally",
    "SoakResult": "runner",
    "SoakSummary": "summary",
    "SoakWriterConfig": "config",
    "Violation": "violations",
    "profile_named": "profiles",
    "referee_history": "referee",
    "run_boot_storm": "boot_storm",
    "run_multi_process_soak": "runner",
    "run_soak_writer": "writer",
    "verify_soak_history": "referee",
}

__all__ = [
    "DEFAULT_SOAK_QUORUM",
    "DEFAULT_SOAK_RUNS",
    "PROFILES",
    "BootStormResult",
    "ChaosPlan",
    "Event",
    "ListSink",
    "RefereeVerdict",
    "SoakActivity",
    "SoakFailure",
    "SoakHealth",
    "SoakHooks",
    "SoakProfile",
    "SoakQuorum",
    "SoakResult",
    "SoakSummary",
    "SoakWriterConfig",
    "Violation",
    "profile_named",
    "referee_history",
    "run_boot_storm",
    "run_multi_process_soak",
    "run_soak_writer",
    "verify_soak_history",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
