"""The failover soak's set-up: what it says where it cannot run, and its pinned Patroni."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rulvar_conformance.faults.patroni_cluster import PATRONI_PIN

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.clause("H6")
def test_without_patroni_the_failover_soak_says_what_is_missing_and_exits_2(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "RULVAR_PATRONI": str(tmp_path / "no-patroni")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rulvar_cli",
            "soak",
            "postgresql://localhost/x",
            "--faults",
            "failover",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "the failover soak cannot run here" in said
    # As root the missing venv is named; as another user, the root requirement.
    assert ("no-patroni is missing" in said) or ("not root" in said)


def test_ci_installs_the_patroni_release_the_fault_layer_is_pinned_to() -> None:
    install = (ROOT / "ci" / "install.sh").read_text()
    assert f"RULVAR_PATRONI_PIN={PATRONI_PIN}\n" in install
    assert "patroni[etcd3,psycopg3]==${RULVAR_PATRONI_PIN}" in install


def test_the_plans_inject_every_kind_round_robin_and_ci_meets_the_target() -> None:
    """A capped run still has faults of every kind; CI's plan has >= 3 of each."""
    from rulvar_conformance.faults.failover import FAILOVER_PLANS, FailoverPlan
    from rulvar_conformance.faults.failover_judge import FAULT_KINDS

    order = FailoverPlan(kill=2, zombie=1, isolate=0, switchover=2).order()
    assert order == ["kill", "zombie", "switchover", "kill", "switchover"]
    assert all(FAILOVER_PLANS["ci"].counts()[kind] >= 3 for kind in FAULT_KINDS)
    assert FAILOVER_PLANS["ci"].order()[:4] == list(FAULT_KINDS)
