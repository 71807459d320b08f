"""Faults beyond process death, driven from the soak's storm loop (issue 20).

A ``FaultDriver`` is what ``run_multi_process_soak(..., faults=...)`` calls:
``launch`` (how writer ``i`` starts: on which host, reaching the server where),
``step`` (one fault, when the chaos clock says so), ``tick`` (every poll: heal
what is due), ``settle`` (before the writers are told to stop: heal everything,
the server up) and ``missing`` (fault counts still below the plan's minimum).
Every action is a chaos record (``storm.record``) with the monotonic clock, so
``faults.judge`` reads what happened from the same timeline as the writers' logs.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from rulvar_conformance.faults.netns import HostFabric
from rulvar_conformance.faults.pg_cluster import PrivateCluster
from rulvar_conformance.faults.proxy import FaultProxy
from rulvar_conformance.soak.events import Event, monotonic_ns
from rulvar_conformance.soak.violations import Violation, violation

if TYPE_CHECKING:
    from rulvar_conformance.soak.storm import Storm, WriterProcess

__all__ = ["FaultDriver", "FaultPlan", "NetworkFaults", "ServerFaults", "lease_held_by"]

DEGRADE_DELAY_MS: Final = 40
DEGRADE_LOSS_PCT: Final = 5.0
_TENURE_ENDS: Final = frozenset({"released", "stall", "fence-kick", "unknown", "held"})


@dataclass(frozen=True)
class FaultPlan:
    """How many faults of each kind a soak must inject, and how long they last.

    ``partition_ttls``: a cut lasts this many lease ttls (always past one, so the
    cut-off holder's lease expires and another writer may take the run over).
    ``outage_ms``: how long a killed server stays down before it is started again.
    """

    partitions: int = 0
    resets: int = 0
    degrades: int = 0
    server_kills: int = 0
    interval_ms: int = 500
    partition_ttls: tuple[float, float] = (2.0, 8.0)
    degrade_ms: tuple[int, int] = (800, 2500)
    outage_ms: tuple[int, int] = (300, 1500)


class _Link(Protocol):
    """Faults between writer host ``index`` and the server (``HostFabric``, ``FaultProxy``)."""

    def cut(self, index: int) -> None: ...

    def heal(self, index: int) -> None: ...

    def reset(self, index: int) -> int: ...

    def degrade(self, index: int, delay_ms: int, loss_pct: float) -> str: ...

    def restore(self, index: int) -> dict[str, int]: ...


class FaultDriver(Protocol):
    """What the storm loop asks of a fault layer (see the module docstring)."""

    plan: FaultPlan

    def launch(self, index: int) -> tuple[list[str], dict[str, str]]: ...

    def step(self, storm: Storm) -> None: ...

    def tick(self, storm: Storm) -> None: ...

    def settle(self, storm: Storm) -> None: ...

    def missing(self) -> list[str]: ...

    def describe(self) -> dict[str, Any]: ...

    def finish(self) -> tuple[dict[str, Any], list[Violation]]: ...


def lease_held_by(writer: WriterProcess) -> tuple[str, int] | None:
    """The (run, epoch) the writer's log says it holds now, if any."""
    for event in reversed(writer.events):
        kind = event.get("t")
        if kind == "grant":
            return str(event["run"]), int(event["epoch"])
        if kind in _TENURE_ENDS:
            return None
    return None


LEAK_WAIT_S: Final = 30.0
"""How long the server may take to notice its last clients are gone (keepalives)."""


class _ConnectionCount:
    """``pg_stat_activity`` before the writers start and after they have all exited."""

    def __init__(self, cluster: PrivateCluster) -> None:
        self.cluster = cluster
        self.leak_wait_s = LEAK_WAIT_S
        self.before = len(cluster.client_backends())

    def finish(self) -> tuple[dict[str, Any], list[Violation]]:
        deadline = time.monotonic() + self.leak_wait_s
        while True:
            rows = self.cluster.client_backends()
            if len(rows) <= self.before or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        leaked = max(0, len(rows) - self.before)
        figures = {
            "server_connections": {
                "before": self.before,
                "after": len(rows),
                "leaked": leaked,
            },
            "rows": [
                (
                    "server connections before / after",
                    f"{self.before} / {len(rows)} (pg_stat_activity; {leaked} leaked)",
                )
            ],
        }
        found = (
            [
                violation(
                    f"CONNECTION LEAK: the server still held {leaked} client connection(s) "
                    f"{self.leak_wait_s:g} s after every writer had exited: {rows[:3]}"[
                        :600
                    ]
                )
            ]
            if leaked
            else []
        )
        return figures, found


@dataclass
class _Cut:
    writer: WriterProcess
    heal_at: float


class NetworkFaults(_ConnectionCount):
    """Partitions, resets and slow links between writer hosts and the private server.

    On ``fabric`` (network namespaces, root) or, without it, on ``proxy`` (one
    loopback TCP fault proxy per writer host): the records say which.
    """

    def __init__(
        self,
        plan: FaultPlan,
        cluster: PrivateCluster,
        ttl_ms: int,
        *,
        fabric: HostFabric | None = None,
        proxy: FaultProxy | None = None,
    ) -> None:
        self.link: _Link
        if fabric is not None and proxy is None:
            self.link = fabric
        elif proxy is not None and fabric is None:
            self.link = proxy
        else:
            raise ValueError("NetworkFaults needs exactly one of fabric and proxy")
        super().__init__(cluster)
        self.plan, self.ttl_ms = plan, ttl_ms
        self.fabric, self.proxy = fabric, proxy
        self.cuts: dict[int, _Cut] = {}
        self.healing: list[tuple[WriterProcess, int, float]] = []
        self.slow: dict[int, float] = {}
        self.done = {"partition": 0, "reset": 0, "degrade": 0}
        self.via = (
            "network namespaces + veth"
            if fabric is not None
            else "loopback TCP fault proxy"
        )

    def launch(self, index: int) -> tuple[list[str], dict[str, str]]:
        if self.proxy is not None:
            return [], {"PGHOST": "127.0.0.1", "PGPORT": str(self.proxy.port_of(index))}
        assert self.fabric is not None
        env = {"PGHOST": self.fabric.server_address, "PGPORT": str(self.cluster.port)}
        return self.fabric.prefix(index), env

    def step(self, storm: Storm) -> None:
        if not _writing(storm):
            return
        left = [kind for kind, count in self.done.items() if count < self._goal(kind)]
        healthy = [
            w
            for w in storm.writers.values()
            if w.paused_until is None
            and w.index not in self.cuts
            and w.index not in self.slow
        ]
        if not left or not healthy:
            return
        kind = storm.rng.choice(left)
        if kind == "partition":
            # Only a lease holder: the point is a holder cut off past its ttl.
            holders = [(w, held) for w in healthy if (held := _held_now(storm, w))]
            if not holders or len(self.cuts) >= max(1, len(storm.writers) // 2):
                return
            writer, (run_id, epoch) = storm.rng.choice(holders)
            low, high = self.plan.partition_ttls
            hold_s = storm.rng.uniform(low, high) * self.ttl_ms / 1000.0
            self.link.cut(writer.index)
            self.cuts[writer.index] = _Cut(writer, time.monotonic() + hold_s)
            storm.record(
                "partition", writer, run=run_id, epoch=epoch,
                hold_ms=round(hold_s * 1000), ttl_ms=self.ttl_ms, via=self.via,
            )  # fmt: skip
        elif kind == "reset":
            writer = storm.rng.choice(healthy)
            sockets = self.link.reset(writer.index)
            storm.record("reset", writer, sockets=sockets, via=self.via)
            if sockets == 0:
                return  # the writer had no connection open: no reset happened
        else:
            writer = storm.rng.choice(healthy)
            low_ms, high_ms = self.plan.degrade_ms
            hold_s = storm.rng.uniform(low_ms, high_ms) / 1000.0
            what = self.link.degrade(writer.index, DEGRADE_DELAY_MS, DEGRADE_LOSS_PCT)
            self.slow[writer.index] = time.monotonic() + hold_s
            storm.record("degrade", writer, what=what, hold_ms=round(hold_s * 1000))
        self.done[kind] += 1

    def _goal(self, kind: str) -> int:
        return {
            "partition": self.plan.partitions,
            "reset": self.plan.resets,
            "degrade": self.plan.degrades,
        }[kind]

    def tick(self, storm: Storm) -> None:
        now = time.monotonic()
        for index, cut in list(self.cuts.items()):
            if now >= cut.heal_at:
                self._heal_one(storm, index)
        for index, until in list(self.slow.items()):
            if now >= until:
                self._restore_one(storm, index)

    def _restore_one(self, storm: Storm, index: int) -> None:
        packets = self.link.restore(index)
        del self.slow[index]
        storm.record(
            "restore", storm.writers.get(index) or _gone(storm, index), **packets
        )

    def _heal_one(self, storm: Storm, index: int) -> None:
        cut = self.cuts.pop(index)
        self.link.heal(index)
        storm.record("heal", cut.writer)
        self.healing.append((cut.writer, monotonic_ns(), time.monotonic()))

    def _recovering(self) -> int:
        """Healed writers with no success since their heal (the storm waits for
        them, up to ``RECOVERY_S``, so each heal's recovery is seen, not cut off)."""
        from rulvar_conformance.faults.judge import RECOVERY_S, SUCCESS

        now = time.monotonic()
        self.healing = [
            (writer, heal_ns, healed)
            for writer, heal_ns, healed in self.healing
            if not writer.killed
            and now - healed < RECOVERY_S
            and not any(
                e.get("t") in SUCCESS and int(e.get("ns", 0)) > heal_ns
                for e in writer.events[-50:]
            )
        ]
        return len(self.healing)

    def settle(self, storm: Storm) -> None:
        for index in list(self.cuts):
            self._heal_one(storm, index)
        for index in list(self.slow):
            self._restore_one(storm, index)

    def missing(self) -> list[str]:
        left = [
            f"{kind}s {count}/{self._goal(kind)}"
            for kind, count in self.done.items()
            if count < self._goal(kind)
        ]
        # A cut still open or a healed writer not yet answered: its recovery is
        # part of what the soak must see before it stops.
        waiting = len(self.cuts) + self._recovering()
        return [*left, f"recoveries pending {waiting}"] if waiting else left

    def describe(self) -> dict[str, Any]:
        degrade = self.fabric.degrade_kind if self.fabric is not None else "proxy delay"
        return {"kind": "network", "via": self.via, "degrade": degrade or "none ran"}


def _writing(storm: Storm) -> bool:
    """Every live writer has been answered once: faults before that would land
    in the boot (the next interpreter start), not in the storm they are for."""
    from rulvar_conformance.faults.judge import SUCCESS

    return all(
        any(e.get("t") in SUCCESS for e in w.events) for w in storm.writers.values()
    )


def _held_now(storm: Storm, writer: WriterProcess) -> tuple[str, int] | None:
    storm.drain(writer)
    return lease_held_by(writer)


def _gone(storm: Storm, index: int) -> WriterProcess:
    """The latest incarnation of writer ``index`` (it may have exited since)."""
    return [w for w in storm.all_writers() if w.index == index][-1]


class ServerFaults(_ConnectionCount):
    """SIGKILL the private server (postmaster and every backend) and start it again.

    The restart runs on a thread so the storm keeps polling (and pausing and
    resuming writers) through the outage and the crash recovery.
    """

    def __init__(self, plan: FaultPlan, cluster: PrivateCluster) -> None:
        super().__init__(cluster)
        self.plan = plan
        self.kills = 0
        self.restarting: threading.Thread | None = None
        self.restart_error: BaseException | None = None
        self.pending: list[Event] = []

    def launch(self, index: int) -> tuple[list[str], dict[str, str]]:
        return [], {"PGHOST": self.cluster.socket_dir, "PGPORT": str(self.cluster.port)}

    def step(self, storm: Storm) -> None:
        if (
            self.kills >= self.plan.server_kills
            or self.restarting is not None
            or not _writing(storm)
        ):
            return
        low, high = self.plan.outage_ms
        outage_s = storm.rng.uniform(low, high) / 1000.0
        killed_ns = monotonic_ns()
        processes = self.cluster.kill()
        self.kills += 1
        anyone = next(iter(storm.writers.values()))
        storm.record(
            "server-kill",
            anyone,
            processes=processes,
            planned_outage_ms=round(outage_s * 1000),
        )

        def restart() -> None:
            time.sleep(outage_s)
            try:
                self.cluster.start()
            except (
                BaseException
            ) as exc:  # reported by tick: the storm loop owns violations
                self.restart_error = exc
            self.pending.append(
                {
                    "t": "server-up",
                    "outage_ms": round((monotonic_ns() - killed_ns) / 1e6),
                }
            )

        self.restarting = threading.Thread(
            target=restart, name="server-restart", daemon=True
        )
        self.restarting.start()

    def tick(self, storm: Storm) -> None:
        if self.restarting is None or self.restarting.is_alive():
            return
        self.restarting = None
        anyone = next(iter(storm.writers.values()))
        for event in self.pending:
            storm.record(str(event["t"]), anyone, outage_ms=event["outage_ms"])
        self.pending.clear()
        if self.restart_error is not None:
            storm.violations.append(
                violation(f"SERVER DID NOT RESTART: {self.restart_error!r}"[:600])
            )
            self.restart_error = None

    def settle(self, storm: Storm) -> None:
        if self.restarting is not None:
            self.restarting.join()
            self.tick(storm)

    def missing(self) -> list[str]:
        if self.kills >= self.plan.server_kills:
            return []
        return [f"server_kills {self.kills}/{self.plan.server_kills}"]

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "server",
            "via": "private cluster, SIGKILL of every server process",
        }
