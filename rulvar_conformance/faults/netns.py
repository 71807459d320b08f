"""Writer hosts as network namespaces on a private bridge: cut, heal, reset, degrade.

``HostFabric`` (root only) makes one bridge holding the server's address and,
per writer host, a network namespace joined to the bridge by a veth pair:

    namespace rulvar-<tag>-h<i>: veth <addr .i+2> == veth rv<tag>h<i> -- bridge rv<tag>b <addr .1>

The private PostgreSQL cluster listens on the bridge address only, so nothing
else on the machine reaches it and the shared servers are never touched.
Faults, all from outside the writer processes:

- ``cut(i)``: the host side of host i's veth goes down: every packet either way
  is dropped (a partition; TCP retransmits into the void), ``heal(i)`` brings it back.
- ``reset(i)``: ``ss -K`` destroys the server's sockets to host i; the kernel
  sends a RST, so the writer's connections fail at once (a middlebox reset).
- ``degrade(i)`` / ``restore(i)``: ``tc netem`` delay and loss on the host side
  of the veth; a kernel without netem gets the same from htb, tbf and a classic
  BPF filter's random draw (see ``degrade``), and the fault record says which
  ran and how many packets the link passed and dropped.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from rulvar_conformance.faults._leftovers import OwnerRecord, claim, release, sweep
from rulvar_conformance.harness.processes import run_tool
from rulvar_store import ConfigError

__all__ = ["HostFabric", "netns_available"]

COMMAND_TIMEOUT_S: Final = 20
_BPF_RANDOM: Final = 2**32 - 4096 + 56
"""Classic BPF's load offset of the random ancillary word (SKF_AD_OFF + SKF_AD_RANDOM)."""
_CLASS_PASS: Final = 0x10010
_CLASS_DROP: Final = 0x10020
_STATS: Final = re.compile(
    r"^qdisc (\S+) (\S+) .*\n Sent \d+ bytes (\d+) pkt \(dropped (\d+)", re.M
)


def netns_available() -> str | None:
    """None when namespaces can be made here, else why not (the proxy is used then)."""
    if os.geteuid() != 0:
        return "not root: network namespaces need CAP_NET_ADMIN"
    for tool in ("ip", "tc", "ss"):
        if shutil.which(tool) is None:
            return f"{tool} is missing (install iproute2)"
    return None


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = run_tool(argv, COMMAND_TIMEOUT_S)
    if check and done.returncode != 0:
        raise ConfigError(
            f"network fault layer: {' '.join(argv)} failed: {done.stderr.strip()[:300]}"
        )
    return done


def _unused_subnet() -> int:
    """A random 10.213.N.0/24 no interface here has an address in (soaks run side by side)."""
    shown = _run("ip", "-4", "-o", "addr", "show", check=False).stdout
    taken = {int(n) for n in re.findall(r"inet 10\.213\.(\d+)\.", shown)}
    free = [n for n in range(16, 240) if n not in taken]
    if not free:
        raise ConfigError("network fault layer: every 10.213.N.0/24 is in use")
    return free[secrets.randbelow(len(free))]


def _packet_counts(shown: str) -> dict[str, int]:
    """Sent and dropped packets of a slow link from ``tc -s qdisc show``.

    With netem (one qdisc) its counts; with the htb construction, what the
    latency class sent and what the loss class (handle 20:) dropped.
    """
    sent = dropped = 0
    for kind, handle, packets, drops in _STATS.findall(shown):
        if kind == "netem":
            return {"sent": int(packets), "dropped": int(drops)}
        if handle == "10:":
            sent += int(packets)
        elif handle == "20:":
            dropped += int(drops)
    return {"sent": sent, "dropped": dropped}


def _shape(prefix: tuple[str, ...], dev: str, delay_ms: int, loss_pct: float) -> str:
    """Delay and loss on ``dev``'s egress: netem, or its stand-in; returns which."""
    done = _run(
        *prefix, "tc", "qdisc", "replace", "dev", dev, "root", "netem",
        "delay", f"{delay_ms}ms", "loss", f"{loss_pct}%", check=False,
    )  # fmt: skip
    if done.returncode == 0:
        return f"netem delay {delay_ms} ms, loss {loss_pct}%"
    # No netem in this kernel (no sch_netem): build loss and delay from what is
    # there. An htb root sends each packet to class 1:10 (a tbf slow link, a
    # queue that adds latency) or, when a classic BPF filter's random draw falls
    # under the loss share, to class 1:20, whose pfifo holds 0 packets: dropped.
    threshold = int(loss_pct / 100.0 * 2**32)
    program = ",".join(
        [
            "4",
            f"32 0 0 {_BPF_RANDOM}",  # A = a random u32
            f"53 0 1 {threshold}",  # A >= threshold: the next line, else skip it
            f"6 0 0 {_CLASS_PASS}",  # classid 1:10
            f"6 0 0 {_CLASS_DROP}",  # classid 1:20
        ]
    )
    latency_ms = max(delay_ms, 50)
    for argv in (
        ("qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "10"),
        ("class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb", "rate", "1gbit"),
        ("class", "add", "dev", dev, "parent", "1:", "classid", "1:20", "htb", "rate", "1gbit"),
        ("qdisc", "add", "dev", dev, "parent", "1:20", "handle", "20:", "pfifo", "limit", "0"),
        ("qdisc", "add", "dev", dev, "parent", "1:10", "handle", "10:", "tbf",
         "rate", "256kbit", "burst", "4kb", "latency", f"{latency_ms}ms"),
        ("filter", "add", "dev", dev, "parent", "1:", "bpf", "bytecode", program,
         "classid", "1:10"),
    ):  # fmt: skip
        _run(*prefix, "tc", *argv)
    return (
        f"htb: tbf 256 kbit/s (queue latency <= {latency_ms} ms) + {loss_pct}% random "
        "loss by a BPF filter, both ways (this kernel has no tc netem)"
    )


@dataclass
class HostFabric:
    """The bridge, namespaces and veths of one soak; ``close()`` removes them all."""

    hosts: int
    tag: str = field(default_factory=lambda: secrets.token_hex(2))
    subnet: int = field(default_factory=lambda: _unused_subnet())
    made: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    degrade_kind: str = ""
    record: Path | None = None

    @property
    def bridge(self) -> str:
        return f"rv{self.tag}b"

    @property
    def server_address(self) -> str:
        return f"10.213.{self.subnet}.1"

    def host_address(self, index: int) -> str:
        return f"10.213.{self.subnet}.{index + 2}"

    def veth(self, index: int) -> str:
        return f"rv{self.tag}h{index}"

    def namespace(self, index: int) -> str:
        return f"rulvar-{self.tag}-h{index}"

    def open(self) -> HostFabric:
        """Make the bridge and every host; on failure, undo what was made.

        Fabrics of soaks that died without closing them go first (``_leftovers``).
        """
        sweep("netns", remove_fabric_of)
        self.record = claim("netns", self.tag)
        try:
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            self.made.append(self.bridge)
            _run("ip", "addr", "add", f"{self.server_address}/24", "dev", self.bridge)
            _run("ip", "link", "set", self.bridge, "up")
            for index in range(self.hosts):
                self._host(index)
        except BaseException:
            self.close()
            raise
        return self

    def _host(self, index: int) -> None:
        ns, outside, inside = (
            self.namespace(index),
            self.veth(index),
            f"rv{self.tag}n{index}",
        )
        _run("ip", "netns", "add", ns)
        self.namespaces.append(ns)
        _run("ip", "link", "add", outside, "type", "veth", "peer", "name", inside)
        self.made.append(outside)
        _run("ip", "link", "set", inside, "netns", ns)
        _run("ip", "link", "set", outside, "master", self.bridge)
        _run("ip", "link", "set", outside, "up")
        in_ns = ("ip", "netns", "exec", ns)
        _run(
            *in_ns, "ip", "addr", "add", f"{self.host_address(index)}/24", "dev", inside
        )
        _run(*in_ns, "ip", "link", "set", inside, "up")
        _run(*in_ns, "ip", "link", "set", "lo", "up")

    def prefix(self, index: int) -> list[str]:
        """The argv prefix that runs a command on host ``index``."""
        return ["ip", "netns", "exec", self.namespace(index)]

    def cut(self, index: int) -> None:
        _run("ip", "link", "set", self.veth(index), "down")

    def heal(self, index: int) -> None:
        _run("ip", "link", "set", self.veth(index), "up")

    def reset(self, index: int) -> int:
        """RST every server socket to host ``index``; returns how many were destroyed."""
        done = _run(
            "ss", "-K", "-t", "-n", "-H", "dst", self.host_address(index), check=False
        )
        # ss prints each socket it destroyed (header suppressed with -H).
        return sum(1 for line in done.stdout.splitlines() if line.strip())

    def _ends(self, index: int) -> tuple[tuple[tuple[str, ...], str], ...]:
        """Both ends of host ``index``'s link: (command prefix, device)."""
        inside = ("ip", "netns", "exec", self.namespace(index))
        return ((), self.veth(index)), (inside, f"rv{self.tag}n{index}")

    def degrade(self, index: int, delay_ms: int, loss_pct: float) -> str:
        """Delay and loss both ways on host ``index``'s link; returns what ran."""
        for prefix, dev in self._ends(index):
            self.degrade_kind = _shape(prefix, dev, delay_ms, loss_pct)
        return self.degrade_kind

    def restore(self, index: int) -> dict[str, int]:
        """Remove the slow link; returns the packets it passed and dropped."""
        total = {"sent": 0, "dropped": 0}
        for prefix, dev in self._ends(index):
            shown = _run(*prefix, "tc", "-s", "qdisc", "show", "dev", dev, check=False)
            _run(*prefix, "tc", "qdisc", "del", "dev", dev, "root", check=False)
            for key, value in _packet_counts(shown.stdout).items():
                total[key] += value
        return total

    def close(self) -> None:
        """Remove every link and namespace this fabric made (idempotent)."""
        for link in reversed(self.made):
            _run("ip", "link", "del", link, check=False)
        self.made.clear()
        for ns in self.namespaces:
            _run("ip", "netns", "del", ns, check=False)
        self.namespaces.clear()
        if self.record is not None:
            release(self.record)
            self.record = None


def remove_fabric_of(record: OwnerRecord) -> None:
    """Remove every namespace and link of the fabric ``record`` names (idempotent)."""
    tag = str(record["tag"])
    listed = _run("ip", "-o", "link", "show").stdout
    # "7: rv1a2bh0@if6: <...>": the name ends at '@' (a veth) or ':'.
    links = {line.split(":")[1].strip().split("@")[0] for line in listed.splitlines()}
    # The bridge last: its ports go with their veths.
    for link in sorted(links, key=lambda name: name.endswith("b")):
        if link.startswith(f"rv{tag}"):
            _run("ip", "link", "del", link, check=False)
    for line in _run("ip", "netns", "list").stdout.splitlines():
        ns = line.split()[0] if line.strip() else ""
        if ns.startswith(f"rulvar-{tag}-"):
            _run("ip", "netns", "del", ns, check=False)
