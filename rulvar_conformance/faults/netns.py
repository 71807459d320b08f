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
  of the veth; a kernel without netem gets a token-bucket slow link instead
  (``tbf``), and the fault record says which one ran.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Final

from rulvar_store import ConfigError

__all__ = ["HostFabric", "netns_available"]

COMMAND_TIMEOUT_S: Final = 20


def netns_available() -> str | None:
    """None when namespaces can be made here, else why not (the proxy is used then)."""
    if os.geteuid() != 0:
        return "not root: network namespaces need CAP_NET_ADMIN"
    for tool in ("ip", "tc", "ss"):
        if shutil.which(tool) is None:
            return f"{tool} is missing (install iproute2)"
    return None


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    if check and done.returncode != 0:
        raise ConfigError(
            f"network fault layer: {' '.join(argv)} failed: {done.stderr.strip()[:300]}"
        )
    return done


@dataclass
class HostFabric:
    """The bridge, namespaces and veths of one soak; ``close()`` removes them all."""

    hosts: int
    tag: str = field(default_factory=lambda: secrets.token_hex(2))
    subnet: int = field(default_factory=lambda: 16 + secrets.randbelow(200))
    made: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    degrade_kind: str = ""

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
        """Make the bridge and every host; on failure, undo what was made."""
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

    def degrade(self, index: int, delay_ms: int, loss_pct: float) -> str:
        """Delay and loss on host ``index``'s link; returns what ran (netem or tbf)."""
        dev = self.veth(index)
        done = _run(
            "tc", "qdisc", "replace", "dev", dev, "root", "netem",
            "delay", f"{delay_ms}ms", "loss", f"{loss_pct}%", check=False,
        )  # fmt: skip
        if done.returncode == 0:
            self.degrade_kind = f"netem delay {delay_ms} ms, loss {loss_pct}%"
            return self.degrade_kind
        # No netem in this kernel: a slow link (a queue that adds latency) instead.
        _run(
            "tc", "qdisc", "replace", "dev", dev, "root", "tbf",
            "rate", "256kbit", "burst", "4kb", "latency", f"{max(delay_ms, 50)}ms",
        )  # fmt: skip
        self.degrade_kind = (
            f"tbf 256 kbit/s, queue latency <= {max(delay_ms, 50)} ms "
            f"(tc netem unavailable: {done.stderr.strip()[:80]})"
        )
        return self.degrade_kind

    def restore(self, index: int) -> None:
        _run("tc", "qdisc", "del", "dev", self.veth(index), "root", check=False)

    def close(self) -> None:
        """Remove every link and namespace this fabric made (idempotent)."""
        for link in reversed(self.made):
            _run("ip", "link", "del", link, check=False)
        self.made.clear()
        for ns in self.namespaces:
            _run("ip", "netns", "del", ns, check=False)
        self.namespaces.clear()
