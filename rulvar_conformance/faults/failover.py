"""``run_failover_soak``: writers on a replicated cluster while its leader fails over.

The soak starts its own cluster (``PatroniCluster``: etcd and three PostgreSQL
nodes under Patroni, each on a network namespace host) in one replication mode,
starts writer processes on their own hosts (each with the nodes in another
order in its multi-host URL), and then, one at a time and each only once the
cluster is healthy again, injects the planned faults on the current leader:

- ``kill``: SIGKILL of its Patroni, postmaster and every backend (a host crash);
  the host comes back a moment after the promotion and rejoins (pg_rewind);
- ``zombie``: SIGSTOP of its Patroni only; its PostgreSQL keeps serving until
  ``zombie_life_s`` after the promotion, when SIGCONT lets Patroni demote it;
- ``isolate``: cut off from etcd, the other nodes and the odd-numbered writer
  hosts, while the even-numbered ones still reach it, until ``cut_life_s``
  after the promotion;
- ``switchover``: Patroni's planned hand-over.

Then the writers stop, the judge (``failover_judge``) reads every run's journal
from the surviving primary and the records, and the cluster, the namespaces,
every process and the temporary folders are removed, even on failure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from rulvar_conformance.faults.failover_judge import (
    FAULT_KINDS,
    PROMISED,
    FailoverVerdict,
    judge_failover,
)
from rulvar_conformance.faults.failover_writer import ENV, WriterConfig
from rulvar_conformance.faults.patroni_cluster import NODES, PatroniCluster
from rulvar_conformance.harness.processes import start_module
from rulvar_conformance.soak.events import Event, FileSink, monotonic_ns, read_events
from rulvar_store import ConfigError, StoreUnavailableError, open_store

__all__ = ["FAILOVER_PLANS", "FailoverPlan", "FailoverResult", "run_failover_soak"]

SCHEMA: Final = "rulvar_failover"
CLIENT_OPTIONS: Final = (
    f"schema={SCHEMA}&target_session_attrs=read-write&connect_timeout_s=2"
    "&keepalives=1&keepalives_idle=1&keepalives_interval=1&keepalives_count=2"
    "&tcp_user_timeout=1000"
)
"""The URL's options: read-write sessions only, and dead links noticed in ~1-2 s."""
POLL_S: Final = 0.2
PROMOTION_WAIT_S: Final = 90.0
HEALTHY_WAIT_S: Final = 120.0
STOP_WAIT_S: Final = 30.0


@dataclass(frozen=True)
class FailoverPlan:
    """How many faults of each kind, and the writers' load (see the module docstring)."""

    kill: int = 1
    zombie: int = 1
    isolate: int = 1
    switchover: int = 1
    writers: int = 4
    runs: int = 8
    ttl_ms: int = 3000
    settle_s: float = 2.0
    zombie_life_s: float = 6.0
    cut_life_s: float = 5.0
    restart_after_s: float = 1.0
    cap_s: float = 900.0

    def counts(self) -> dict[str, int]:
        return {kind: int(getattr(self, kind)) for kind in FAULT_KINDS}

    def order(self) -> list[str]:
        """Round-robin over the kinds, so a capped run still has some of each."""
        left = self.counts()
        order: list[str] = []
        while any(left.values()):
            for kind in FAULT_KINDS:
                if left[kind]:
                    order.append(kind)
                    left[kind] -= 1
        return order


FAILOVER_PLANS: Final = {
    "quick": FailoverPlan(),
    "ci": FailoverPlan(kill=3, zombie=3, isolate=3, switchover=3),
}
"""``quick``: one fault of each kind (~2.5 min); ``ci``: three of each (issue 34's target)."""


@dataclass
class FailoverResult:
    mode: str
    plan: FailoverPlan
    verdict: FailoverVerdict
    wall_s: float
    setup_s: float
    actions: list[Event] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.verdict.violations

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "plan": asdict(self.plan),
            "wall_s": round(self.wall_s, 1),
            "setup_s": round(self.setup_s, 1),
            "figures": self.verdict.figures,
            "violations": self.verdict.violations,
            "passed": self.passed,
        }


class _Actions:
    """The driver's records, in memory and in ``actions.jsonl``."""

    def __init__(self, folder: Path, say: Callable[[str], None]) -> None:
        self.events: list[Event] = []
        self.sink = FileSink(str(folder / "actions.jsonl"))
        self.say = say
        self.started = time.monotonic()

    def record(self, what: str, **fields: Any) -> None:
        event: Event = {"t": what, "ns": monotonic_ns(), **fields}
        self.events.append(event)
        self.sink(event)
        detail = " ".join(f"{k}={v}" for k, v in fields.items())
        self.say(f"  [{time.monotonic() - self.started:6.1f} s] {what} {detail}")


def _writer_url(cluster: PatroniCluster, index: int) -> str:
    """Writer ``index``'s URL: the nodes rotated, so each host order is in use."""
    order = [(index + k) % NODES for k in range(NODES)]
    return f"{cluster.url(order=order)}&{CLIENT_OPTIONS}"


def run_failover_soak(
    mode: str,
    plan: FailoverPlan,
    *,
    seed: int = 1,
    report_dir: str | os.PathLike[str] | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> FailoverResult:
    """Run one failover soak in ``mode`` (``async``, ``sync``, ``sync-strict``, ``quorum``).

    Raises:
        ConfigError: the machine cannot run it (not root, no etcd, no Patroni
            venv, ...) or the cluster did not come up.
    """
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="rulvar-failover-"))
    folder = Path(report_dir) if report_dir is not None else scratch
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "logs").mkdir(exist_ok=True)
    stop_path = scratch / "stop"
    cluster = PatroniCluster(mode, plan.writers)
    writers: list[subprocess.Popen[bytes]] = []
    try:
        say(f"starting etcd and 3 Patroni nodes ({mode})")
        cluster.open(HEALTHY_WAIT_S)
        setup_s = time.monotonic() - started
        say(f"  cluster healthy after {setup_s:.1f} s, leader {cluster.leader()}")
        durability = _boot_schema(cluster)
        say(f"  the store's durability(): {durability or 'not reported'}")
        guard = _guard(cluster)
        say(f"  replication=required: {guard}")
        actions = _Actions(folder, say)
        for index in range(plan.writers):
            writers.append(_spawn(cluster, plan, index, seed, folder, stop_path))
        _wait_writing(folder, plan.writers, started + plan.cap_s)
        done = _drive(cluster, plan, actions, started)
        time.sleep(plan.settle_s)
        stop_path.touch()
        hung = _stop_writers(writers)
        stop_ns = monotonic_ns()
        final = _final_state(cluster, plan)
        events = [e for i in range(plan.writers) for e in _events(folder, i)]
        verdict = judge_failover(
            events, actions.events, final, mode=mode, stop_ns=stop_ns, hung=hung,
            planned=plan.counts() if done else None,
        )  # fmt: skip
        verdict.figures["durability"] = durability
        verdict.figures["guard"] = guard
        verdict.rows.insert(1, ("replication=required", guard.split(":")[0]))
        if guard == "accepted" and mode == "async":
            verdict.violations.append(
                "GUARD ACCEPTED ASYNC: replication=required opened the store on an "
                "asynchronously replicated cluster"
            )
        if guard.startswith("refused") and mode in PROMISED:
            verdict.violations.append(
                f"GUARD REFUSED A SYNCHRONOUS CLUSTER ({mode}): {guard}"
            )
        if durability:
            verdict.rows.insert(
                1,
                (
                    "store's durability()",
                    ", ".join(f"{k} {v}" for k, v in durability.items()),
                ),
            )
        if not done:
            verdict.violations.append(
                f"CAP REACHED: the {plan.cap_s:g} s cap ended the faults before the plan"
            )
        result = FailoverResult(
            mode, plan, verdict, time.monotonic() - started, setup_s, actions.events
        )
        (folder / "summary.json").write_text(
            json.dumps(result.to_json(), indent=2) + "\n"
        )
        actions.sink.close()
        return result
    finally:
        for process in writers:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(10)
        cluster.close()
        if report_dir is None:
            import shutil

            shutil.rmtree(scratch, ignore_errors=True)
        else:
            (scratch / "stop").unlink(missing_ok=True)
            scratch.rmdir()


def _boot_schema(cluster: PatroniCluster) -> dict[str, Any]:
    """Create the store's schema once, before the writers race to; returns what the
    store's ``durability()`` says of the cluster (the report shows it per mode)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            with open_store(f"{cluster.url()}&{CLIENT_OPTIONS}") as opened:
                opened.journal.load("boot")
                report = getattr(opened.journal, "durability", None)
                found = report() if report is not None else None
                if found is None or not dataclasses.is_dataclass(found):
                    return {}
                return {
                    f.name: str(getattr(found, f.name))
                    for f in dataclasses.fields(found)
                }
        except StoreUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _guard(cluster: PatroniCluster) -> str:
    """What the store's durability guard (``replication=required``) says of the cluster:
    ``refused: ...``, ``accepted``, or ``not supported: ...`` (a store without it)."""
    try:
        with open_store(
            f"{cluster.url()}&{CLIENT_OPTIONS}&replication=required"
        ) as opened:
            opened.journal.load("boot")
    except ConfigError as exc:
        said = str(exc)
        if "replication=required" in said:
            return f"refused: {said[:300]}"
        return f"not supported: {said[:200]}"
    return "accepted"


def _spawn(
    cluster: PatroniCluster,
    plan: FailoverPlan,
    index: int,
    seed: int,
    folder: Path,
    stop: Path,
) -> subprocess.Popen[bytes]:
    assert cluster.fabric is not None
    config = WriterConfig(
        url=_writer_url(cluster, index),
        writer=index,
        runs=tuple(f"failover-run-{k}" for k in range(plan.runs)),
        ttl_ms=plan.ttl_ms,
        log=str(folder / "logs" / f"w{index}.jsonl"),
        stop=str(stop),
        seed=seed,
    )
    out = (folder / "logs" / f"w{index}.out").open("wb")
    process = start_module(
        "rulvar_conformance.faults.failover_writer",
        env={ENV: config.to_env(), "PYTHONPATH": os.pathsep.join(sys.path)},
        stdout=out,
        stderr=subprocess.STDOUT,
        host=cluster.fabric.prefix(NODES + index),
    )
    out.close()
    return process


def _events(folder: Path, index: int) -> list[Event]:
    path = folder / "logs" / f"w{index}.jsonl"
    return read_events(path)[0] if path.exists() else []


def _wait_writing(folder: Path, writers: int, deadline: float) -> None:
    """Until every writer has had an append acknowledged (faults before would hit boots)."""
    while time.monotonic() < deadline:
        seen = sum(
            any(e.get("t") == "accept" for e in _events(folder, i))
            for i in range(writers)
        )
        if seen == writers:
            return
        time.sleep(0.5)
    raise ConfigError("failover soak: the writers never all wrote before the cap")


def _drive(
    cluster: PatroniCluster, plan: FailoverPlan, actions: _Actions, started: float
) -> bool:
    """Inject every planned fault; False when the cap stopped it early."""
    for n, kind in enumerate(plan.order(), start=1):
        if time.monotonic() - started > plan.cap_s:
            return False
        cluster.wait_healthy(HEALTHY_WAIT_S)
        time.sleep(plan.settle_s)
        leader = cluster.leader()
        if leader is None:
            raise ConfigError("failover soak: the healthy cluster named no leader")
        old, timeline = leader
        actions.record("fault", n=n, kind=kind, node=old, timeline=timeline)
        switching: threading.Thread | None = None
        if kind == "kill":
            cluster.kill_host(old)
        elif kind == "zombie":
            cluster.freeze(old)
        elif kind == "isolate":
            cluster.isolate(old, [w for w in range(plan.writers) if w % 2 == 1])
        else:
            switching = threading.Thread(
                target=cluster.switchover, args=(old,), daemon=True
            )
            switching.start()
        promoted = _await_promotion(cluster, old)
        if promoted is not None:
            actions.record("promoted", n=n, leader=promoted[0], timeline=promoted[1])
        if kind == "kill":
            time.sleep(plan.restart_after_s)
            cluster.start_node(old)
        elif kind == "zombie":
            time.sleep(plan.zombie_life_s)
            cluster.thaw(old)
        elif kind == "isolate":
            time.sleep(plan.cut_life_s)
            cluster.rejoin()
        if switching is not None:
            switching.join(30)
        waited = cluster.wait_healthy(HEALTHY_WAIT_S)
        actions.record("healed", n=n, waited_s=round(waited, 1))
    return True


def _await_promotion(cluster: PatroniCluster, old: str) -> tuple[str, int] | None:
    """The new leader as the nodes other than ``old`` see it, or None past the wait."""
    deadline = time.monotonic() + PROMOTION_WAIT_S
    while time.monotonic() < deadline:
        seen = cluster.leader(skip=(old,))
        if seen is not None and seen[0] != old:
            return seen
        time.sleep(POLL_S)
    return None


def _stop_writers(writers: list[subprocess.Popen[bytes]]) -> list[int]:
    """Wait for every writer to exit after the stop file; returns those that hung."""
    deadline = time.monotonic() + STOP_WAIT_S
    hung: list[int] = []
    for index, process in enumerate(writers):
        try:
            process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            hung.append(index)
    return hung


def _final_state(
    cluster: PatroniCluster, plan: FailoverPlan
) -> dict[str, list[dict[str, Any]]]:
    """Every run's journal as the surviving primary serves it."""
    deadline = time.monotonic() + 60
    while True:
        try:
            with open_store(f"{cluster.url()}&{CLIENT_OPTIONS}") as opened:
                return {
                    run_id: [dict(e) for e in opened.journal.load(run_id)]
                    for run_id in (f"failover-run-{k}" for k in range(plan.runs))
                }
        except StoreUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
