"""The layout the saver's newest-checkpoint read relies on (G9, T12).

``last_ref`` under a namespace's checkpoint prefix names its newest checkpoint
only if checkpoint ids sort in the order LangGraph makes them, and only if one
namespace's prefix never matches another namespace's refs.
"""

from __future__ import annotations

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from rulvar_langgraph._layout import checkpoint_prefix, checkpoint_ref


@pytest.mark.clause("G9")
def test_checkpoint_ids_sort_as_strings_in_the_order_they_were_made() -> None:
    """uuid6 puts its time fields first in fixed-width hex: string order is time order."""
    made = [empty_checkpoint()["id"] for _ in range(2_000)]
    made += [str(uuid6(clock_seq=step)) for step in range(-1, 50)]
    assert sorted(made) == made
    assert len(set(made)) == len(made)


@pytest.mark.clause("G9")
def test_a_namespace_prefix_matches_only_its_own_checkpoints() -> None:
    """Namespaces that prefix each other ("", "a", "a:b", "ab") stay apart."""
    namespaces = ["", "a", "a:b", "ab", "a|b", "é", "b"]
    cid = empty_checkpoint()["id"]
    for ns in namespaces:
        prefix = checkpoint_prefix("run", ns)
        matched = [
            other
            for other in namespaces
            if checkpoint_ref("run", other, cid).startswith(prefix)
        ]
        assert matched == [ns]
