"""Orphans (V11): journals without a meta, blobs without a journal, found and left as the audit says."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import pytest

from rulvar_store.ops import iter_orphans, iter_run_audits
from tests.move._places import Place, seed


def _orphaned(place: Place) -> None:
    seed(place.pair, "whole")
    place.pair.journal.append("journal-only", {"seq": 1, "kind": "x"})
    place.pair.transcripts.put("blobs-only/ckpt/1", b"left behind")


@pytest.mark.clause("V11")
@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_orphans_are_found_and_audited_as_suspect_V11(
    places: Callable[[str], Place], kind: str
) -> None:
    """V11: both kinds are listed; the audit reports them suspect, never repairable (A2, A3)."""
    place = places(kind)
    _orphaned(place)
    found = {(o.run_id, o.kind) for o in iter_orphans(place.pair.journal)}
    assert found == {("journal-only", "journal"), ("blobs-only", "blobs")}
    audits = {a.run_id: a for a in iter_run_audits(place.pair.journal)}
    assert set(audits) == {"journal-only", "blobs-only"}
    assert all(a.verdict == "suspect" and a.repair_to is None for a in audits.values())


@pytest.mark.clause("V11")
def test_the_commands_list_orphans_and_repair_leaves_them_V11(
    places: Callable[[str], Place],
) -> None:
    """V11: runs list --orphans names them; runs audit --repair keeps them and exits 1."""
    place = places("sqlite")
    _orphaned(place)
    assert place.url is not None
    listed = subprocess.run(
        [
            sys.executable,
            "-m",
            "rulvar_cli",
            "runs",
            "list",
            place.url,
            "--orphans",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)["orphans"]
    assert [(r["runId"], r["kind"]) for r in rows] == [
        ("journal-only", "journal"),
        ("blobs-only", "blobs"),
    ]
    audited = subprocess.run(
        [sys.executable, "-m", "rulvar_cli", "runs", "audit", place.url, "--repair"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert audited.returncode == 1
    assert "journal-only suspect" in audited.stdout
    assert "blobs-only suspect" in audited.stdout
    assert place.pair.journal.load("journal-only") != []
    assert place.pair.transcripts.get("blobs-only/ckpt/1") == b"left behind"
    plain = subprocess.run(
        [sys.executable, "-m", "rulvar_cli", "runs", "list", place.url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert plain.returncode == 0
    assert "whole" in plain.stdout
    assert "journal-only" not in plain.stdout
