"""The minimal resolution fold of CONTRACT C5, as the kit names it.

The fold itself lives in ``rulvar_store.ops`` (``_fold``) because the audit (CONTRACT 11)
needs it and the SPI never imports the kit; the journal checks, the golden
fixture and the oracles import it from here.
"""

from __future__ import annotations

from rulvar_store.ops import (
    Classification,
    NoopReason,
    ResolutionFold,
    Seq,
    Verdict,
    classify,
    fold_journal,
    fold_state,
    fold_state_sha256,
)

__all__ = [
    "Classification",
    "NoopReason",
    "ResolutionFold",
    "Seq",
    "Verdict",
    "classify",
    "fold_journal",
    "fold_state",
    "fold_state_sha256",
]
