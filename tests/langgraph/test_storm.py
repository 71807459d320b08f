"""Writer processes storm one thread through the saver under SIGSTOP/SIGKILL (G2).

Real processes on a real SQLite file and a real PostgreSQL schema, each invoking
a real 3-node graph in a hold; the parent pauses writers past the ttl and kills
them. Bounded by the storm's duration and a deadline on every child.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rulvar_conformance.soak.langgraph_storm import (
    referee_chain,
    storm_langgraph_thread,
)
from rulvar_store.backend import UrlOpener
from tests.langgraph._backends import SHARED


@pytest.mark.parametrize("locations", SHARED, indirect=True)
@pytest.mark.clause("G2")
def test_storm_leaves_no_superseded_checkpoint_in_the_chain(
    url_opener: UrlOpener, tmp_path: Path
) -> None:
    """After the storm the final chain holds no checkpoint of a superseded holder."""
    verdict = storm_langgraph_thread(
        url_opener.url,
        dict(url_opener.options),
        writers=3,
        duration_s=8.0,
        ttl_ms=400,
        seed=18,
        workdir=tmp_path,
    )
    assert verdict.ok, verdict
    assert verdict.pauses > 0, verdict
    # The thread really changed hands: more than one holder wrote the chain.
    assert len(verdict.epochs) >= 2, verdict
    assert verdict.chain_length > 0, verdict


@pytest.mark.clause("G2")
def test_referee_finds_a_superseded_holders_checkpoint() -> None:
    """The referee is not blind: a checkpoint landing below a written epoch is named."""
    clean = [["n1:a:1"], ["n1:a:1", "n2:b:2"], ["n1:a:1", "n2:b:2", "n3:b:2"]]
    assert referee_chain(clean) == []
    zombie = [["n1:a:1"], ["n1:a:1", "n2:b:2"], ["n1:a:1", "n2:b:2", "n3:a:1"]]
    found = referee_chain(zombie)
    assert any("superseded holder" in v for v in found), found
    assert any("trail epochs fall" in v for v in found), found
