"""A replicated PostgreSQL cluster the failover soak may kill, freeze, cut off and switch.

``PatroniCluster`` builds, on one machine and as root (issue 34):

- a ``HostFabric`` (``netns``): one bridge whose address serves etcd, and one
  network namespace per host: three PostgreSQL nodes, then the writer hosts;
- one etcd member (Debian's ``etcd-server``) on the bridge address, data in a
  temporary folder;
- three PostgreSQL 15 nodes, each run by its own Patroni (from the package
  index, in a venv built on Debian's ``/usr/bin/python3`` so the ``postgres``
  user can execute it: Patroni and PostgreSQL refuse root), on port 5432 of
  its namespace's address.

Faults, all from outside the nodes: ``kill_host`` (SIGKILL of a node's Patroni,
postmaster and every backend: a host crash), ``freeze``/``thaw`` (SIGSTOP and
SIGCONT of a node's Patroni only: its PostgreSQL keeps serving, a zombie
leader), ``isolate``/``rejoin`` (blackhole routes between a node and etcd, the
other nodes and some writer hosts, both ways; the other writer hosts still reach
it), and ``switchover`` (Patroni's REST API). ``close()`` kills every process it
started and removes its folder and namespaces, whatever state they are in.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from rulvar_conformance.faults._leftovers import OwnerRecord, claim, release, sweep
from rulvar_conformance.faults.netns import HostFabric, netns_available
from rulvar_conformance.faults.pg_cluster import (
    PG_BIN_CANDIDATES,
    _children_of,
    _wait_gone,
)
from rulvar_conformance.harness.processes import run_tool, start_program
from rulvar_store import ConfigError

__all__ = [
    "MODES",
    "NODES",
    "PATRONI_PIN",
    "PatroniCluster",
    "failover_unavailable",
    "patroni_bin",
]

NODES: Final = 3
PATRONI_PIN: Final = "4.1.5"
"""The Patroni release ``ci/install.sh`` installs (``patroni[etcd3,psycopg3]``)."""
PATRONI_VENV: Final = "/opt/rulvar-patroni"
PG_PORT: Final = 5432
REST_PORT: Final = 8008
ETCD_PORT: Final = 2379
TTL_S: Final = 20  # Patroni's minimum
LOOP_WAIT_S: Final = 1
RETRY_TIMEOUT_S: Final = 4
MODES: Final[dict[str, dict[str, Any]]] = {
    "async": {"synchronous_mode": False},
    "sync": {"synchronous_mode": True, "synchronous_mode_strict": False},
    "sync-strict": {"synchronous_mode": True, "synchronous_mode_strict": True},
    "quorum": {"synchronous_mode": "quorum", "synchronous_mode_strict": True},
}
"""Patroni's dynamic settings per replication mode (``bootstrap.dcs``)."""
NODE_PARAMETERS: Final = {
    "shared_buffers": "16MB",
    "max_connections": "100",
    "wal_keep_size": "128MB",
    "wal_log_hints": "on",
    # A cut-off client host is noticed within seconds, not the kernel's hours.
    "tcp_keepalives_idle": "1",
    "tcp_keepalives_interval": "1",
    "tcp_keepalives_count": "3",
    "tcp_user_timeout": "3000",
    "log_min_messages": "warning",
}
_STEP_TIMEOUT_S: Final = 30


def patroni_bin() -> Path:
    """The ``patroni`` executable: ``$RULVAR_PATRONI`` or the venv ``ci/install.sh`` makes."""
    return Path(os.environ.get("RULVAR_PATRONI", f"{PATRONI_VENV}/bin/patroni"))


def node_pg_bin() -> Path | None:
    """The folder of every server binary Patroni runs (``pg_ctl``, ``pg_isready``,
    ``pg_rewind``, ...): ``$RULVAR_PG_BIN`` or a Debian version folder (a folder on
    PATH may hold wrappers of a few of them only)."""
    configured = os.environ.get("RULVAR_PG_BIN")
    if configured:
        return Path(configured)
    for candidate in PG_BIN_CANDIDATES:
        if all(
            (Path(candidate) / tool).exists()
            for tool in ("pg_ctl", "pg_isready", "pg_rewind")
        ):
            return Path(candidate)
    return None


def failover_unavailable() -> str | None:
    """None when this machine can run the failover soak, else what is missing."""
    reason = netns_available()
    if reason is not None:
        return reason
    if shutil.which("etcd") is None:
        return "etcd is missing (apt-get install etcd-server)"
    if shutil.which("setpriv") is None:
        return "setpriv is missing (util-linux)"
    if node_pg_bin() is None:
        return "no PostgreSQL server binaries (postgresql-15)"
    patroni = patroni_bin()
    if not os.access(patroni, os.X_OK):
        return (
            f"{patroni} is missing: make a venv on /usr/bin/python3 at {PATRONI_VENV} "
            f"and pip install 'patroni[etcd3,psycopg3]=={PATRONI_PIN}' (ci/install.sh)"
        )
    try:
        import pwd

        pwd.getpwnam("postgres")
    except KeyError:
        return "no 'postgres' OS user to run Patroni and PostgreSQL as"
    return None


@dataclass
class _Node:
    name: str
    address: str
    root: Path
    process: subprocess.Popen[bytes] | None = None
    frozen: bool = False

    @property
    def data(self) -> Path:
        return self.root / "data"

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (FileNotFoundError, ValueError, PermissionError):
            return None


@dataclass
class PatroniCluster:
    """Three Patroni nodes and etcd on a private fabric; ``open()``, fault, ``close()``.

    Host ``i < NODES`` of ``fabric`` is node ``n<i>``; writer ``j`` is host ``NODES + j``.
    """

    mode: str
    writers: int
    fabric: HostFabric | None = None
    root: Path = field(
        default_factory=lambda: Path(tempfile.mkdtemp(prefix="rulvar-ha-"))
    )
    nodes: list[_Node] = field(default_factory=list)
    etcd: subprocess.Popen[bytes] | None = None
    record: Path | None = None
    routes: list[tuple[str, str]] = field(default_factory=list)

    # -- set-up --------------------------------------------------------------

    def open(self, start_wait_s: float = 120.0) -> PatroniCluster:
        """Start etcd and the three nodes; wait for a leader and two streaming replicas.

        Raises:
            ConfigError: something is missing (``failover_unavailable``) or the
                cluster did not come up within ``start_wait_s``.
        """
        if self.mode not in MODES:
            raise ConfigError(f"no replication mode {self.mode!r}: {', '.join(MODES)}")
        missing = failover_unavailable()
        if missing is not None:
            raise ConfigError(f"the failover soak cannot run here: {missing}")
        sweep("ha", remove_cluster_of)
        self.record = claim("ha", self.root.name, root=str(self.root))
        try:
            self.fabric = HostFabric(NODES + self.writers).open()
            os.chmod(self.root, 0o755)
            self._start_etcd()
            for index in range(NODES):
                node = _Node(
                    f"n{index}",
                    self.fabric.host_address(index),
                    self.root / f"n{index}",
                )
                node.root.mkdir()
                shutil.chown(node.root, "postgres", "postgres")
                os.chmod(node.root, 0o700)
                self._write_config(node)
                self.nodes.append(node)
            for node in self.nodes:
                self.start_node(node.name)
            self.wait_healthy(start_wait_s)
        except BaseException:
            self.close()
            raise
        return self

    @property
    def etcd_address(self) -> str:
        assert self.fabric is not None
        return self.fabric.server_address

    def _start_etcd(self) -> None:
        peer = f"http://127.0.0.1:{_free_port()}"
        client = f"http://{self.etcd_address}:{ETCD_PORT}"
        log = (self.root / "etcd.log").open("wb")
        env = {
            **os.environ,
            "ETCD_UNSUPPORTED_ARCH": os.environ.get("ETCD_UNSUPPORTED_ARCH", ""),
        }
        self.etcd = start_program(
            [
                "etcd",
                "--name",
                "e0",
                "--data-dir",
                str(self.root / "etcd"),
                "--listen-client-urls",
                client,
                "--advertise-client-urls",
                client,
                "--listen-peer-urls",
                peer,
                "--initial-advertise-peer-urls",
                peer,
                "--initial-cluster",
                f"e0={peer}",
                "--log-level",
                "warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={k: v for k, v in env.items() if v},
        )
        log.close()
        deadline = time.monotonic() + _STEP_TIMEOUT_S
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError, ValueError),
                urllib.request.urlopen(f"{client}/health", timeout=1) as answer,
            ):
                if json.loads(answer.read()).get("health") == "true":
                    return
            if self.etcd.poll() is not None:
                break
            time.sleep(0.1)
        raise ConfigError(f"etcd did not start: {self._tail(self.root / 'etcd.log')}")

    def _write_config(self, node: _Node) -> None:
        assert self.fabric is not None
        subnet = f"{self.fabric.server_address.rsplit('.', 1)[0]}.0/24"
        pg_bin = node_pg_bin()
        config = {
            "scope": f"rulvar-{self.fabric.tag}",
            "name": node.name,
            "log": {"level": "WARNING", "dir": str(node.root)},
            "restapi": {
                "listen": f"{node.address}:{REST_PORT}",
                "connect_address": f"{node.address}:{REST_PORT}",
            },
            "etcd3": {"hosts": [f"{self.etcd_address}:{ETCD_PORT}"]},
            "bootstrap": {
                "dcs": {
                    "ttl": TTL_S,
                    "loop_wait": LOOP_WAIT_S,
                    "retry_timeout": RETRY_TIMEOUT_S,
                    "maximum_lag_on_failover": 1048576,
                    "synchronous_node_count": 1,
                    **MODES[self.mode],
                    "postgresql": {
                        "use_pg_rewind": True,
                        "parameters": NODE_PARAMETERS,
                    },
                },
                "initdb": [{"encoding": "UTF8"}, {"auth": "trust"}],
            },
            "postgresql": {
                "listen": f"{node.address}:{PG_PORT}",
                "connect_address": f"{node.address}:{PG_PORT}",
                "data_dir": str(node.data),
                "bin_dir": str(pg_bin),
                "pgpass": str(node.root / "pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres", "password": "rulvar"},
                    "replication": {"username": "replicator", "password": "rulvar"},
                    "rewind": {"username": "postgres", "password": "rulvar"},
                },
                "parameters": {"unix_socket_directories": str(node.root)},
                "pg_hba": [
                    "local all all trust",
                    f"host all all {subnet} trust",
                    f"host replication all {subnet} trust",
                    "host all all 127.0.0.1/32 trust",
                ],
            },
        }
        path = node.root / "patroni.yml"
        path.write_text(json.dumps(config, indent=1))  # JSON is YAML
        shutil.chown(path, "postgres", "postgres")

    # -- processes -------------------------------------------------------------

    def node(self, name: str) -> _Node:
        return next(node for node in self.nodes if node.name == name)

    def start_node(self, name: str) -> None:
        """Start (or restart after a kill) the node's Patroni, as ``postgres`` in its namespace."""
        assert self.fabric is not None
        node = self.node(name)
        index = self.nodes.index(node)
        log = (node.root / "patroni.out").open("ab")
        node.process = start_program(
            [
                *self.fabric.prefix(index),
                "setpriv",
                "--reuid=postgres",
                "--regid=postgres",
                "--init-groups",
                "--",
                str(patroni_bin()),
                str(node.root / "patroni.yml"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=str(node.root),
            new_session=True,
        )
        log.close()
        node.frozen = False

    def kill_host(self, name: str) -> int:
        """SIGKILL the node's Patroni, postmaster and every backend at once; returns how many."""
        node = self.node(name)
        victims: list[int] = []
        if node.process is not None and node.process.poll() is None:
            victims.append(node.process.pid)
        postmaster = node.postmaster_pid()
        if postmaster is not None and Path(f"/proc/{postmaster}").exists():
            victims += [postmaster, *_children_of(postmaster)]
        for victim in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)
        if node.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.process.wait(10)
        _wait_gone(victims)
        node.process, node.frozen = None, False
        return len(victims)

    def freeze(self, name: str) -> None:
        """SIGSTOP the node's Patroni only: its PostgreSQL keeps serving (a zombie)."""
        node = self.node(name)
        assert node.process is not None
        os.kill(node.process.pid, signal.SIGSTOP)
        node.frozen = True

    def thaw(self, name: str) -> None:
        node = self.node(name)
        if node.process is not None and node.frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(node.process.pid, signal.SIGCONT)
        node.frozen = False

    # -- the network -----------------------------------------------------------

    def _blackhole(self, host: int, address: str) -> None:
        """Drop what host ``host`` sends to ``address`` (in its namespace)."""
        assert self.fabric is not None
        ns = self.fabric.namespace(host)
        done = run_tool(
            [
                "ip",
                "netns",
                "exec",
                ns,
                "ip",
                "route",
                "add",
                "blackhole",
                f"{address}/32",
            ],
            _STEP_TIMEOUT_S,
        )
        if done.returncode != 0:
            raise ConfigError(
                f"failover soak: blackhole route failed: {done.stderr[:300]}"
            )
        self.routes.append((ns, address))

    def isolate(self, name: str, cut_writers: list[int]) -> None:
        """Cut node ``name`` off from etcd, the other nodes and writers ``cut_writers``.

        Both ways: blackhole routes in the node's namespace to each of them, and
        in theirs back to it (etcd sits on the bridge, in the root namespace, and
        the node's routes alone cut it there: nothing it sends arrives).
        """
        assert self.fabric is not None
        index = self.nodes.index(self.node(name))
        node_address = self.fabric.host_address(index)
        self._blackhole(index, self.etcd_address)
        for other in range(NODES):
            if other != index:
                self._blackhole(index, self.fabric.host_address(other))
                self._blackhole(other, node_address)
        for writer in cut_writers:
            host = NODES + writer
            self._blackhole(index, self.fabric.host_address(host))
            self._blackhole(host, node_address)

    def rejoin(self) -> None:
        """Remove every blackhole route (idempotent)."""
        for ns, address in self.routes:
            run_tool(
                [
                    "ip",
                    "netns",
                    "exec",
                    ns,
                    "ip",
                    "route",
                    "del",
                    "blackhole",
                    f"{address}/32",
                ],
                _STEP_TIMEOUT_S,
            )
        self.routes.clear()

    # -- Patroni's view ---------------------------------------------------------

    def rest(self, name: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """GET (or POST ``body``) Patroni's REST API of node ``name``; None when unreachable."""
        node = self.node(name)
        request = urllib.request.Request(
            f"http://{node.address}:{REST_PORT}{path}",
            data=None if body is None else json.dumps(body).encode(),
            method="GET" if body is None else "POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=2) as answer:
                text = answer.read()
        except urllib.error.HTTPError as exc:
            text = exc.read()
        except (OSError, ValueError):
            return None
        try:
            return json.loads(text)
        except ValueError:
            return text.decode(errors="replace")

    def members(self, skip: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        """``/cluster`` members as a node not in ``skip`` (nor frozen) sees them."""
        for node in self.nodes:
            if node.name in skip or node.frozen or node.process is None:
                continue
            seen = self.rest(node.name, "/cluster")
            if isinstance(seen, dict) and isinstance(seen.get("members"), list):
                return list(seen["members"])
        return []

    def leader(self, skip: tuple[str, ...] = ()) -> tuple[str, int] | None:
        """The (name, timeline) of the leader the DCS names, seen from outside ``skip``."""
        for member in self.members(skip):
            if member.get("role") in ("leader", "standby_leader"):
                return str(member["name"]), int(member.get("timeline") or 0)
        return None

    def healthy(self) -> bool:
        """A running leader, every other node streaming, and (sync modes) a sync standby."""
        members = self.members()
        if len(members) != NODES:
            return False
        leaders = [m for m in members if m.get("role") == "leader"]
        if len(leaders) != 1 or leaders[0].get("state") != "running":
            return False
        others = [m for m in members if m is not leaders[0]]
        if any(m.get("state") != "streaming" for m in others):
            return False
        # Caught up (lag in bytes; "unknown" while a replica has not reported).
        if any(
            not isinstance(m.get("lag"), int) or m["lag"] > 1_000_000 for m in others
        ):
            return False
        if MODES[self.mode]["synchronous_mode"]:
            return any(
                m.get("role") in ("sync_standby", "quorum_standby") for m in others
            )
        return True

    def wait_healthy(self, limit_s: float) -> float:
        """Wait until ``healthy()``; returns the seconds waited.

        Raises:
            ConfigError: not healthy within ``limit_s`` (with the members' view).
        """
        started = time.monotonic()
        while time.monotonic() - started < limit_s:
            if self.healthy():
                return time.monotonic() - started
            time.sleep(0.25)
        raise ConfigError(
            f"the Patroni cluster was not healthy within {limit_s:g} s: "
            f"{json.dumps(self.members())[:600]} {self.log_tails()}"
        )

    def switchover(self, leader: str) -> Any:
        """Ask the leader to hand over (Patroni picks the candidate)."""
        return self.rest(leader, "/switchover", {"leader": leader})

    def url(self, database: str = "postgres", order: list[int] | None = None) -> str:
        """A libpq multi-host URL of the nodes, in ``order`` (node indexes)."""
        assert self.fabric is not None
        hosts = ",".join(
            self.fabric.host_address(index) for index in (order or list(range(NODES)))
        )
        return f"postgresql://postgres@{hosts}/{database}?port={PG_PORT}"

    def node_url(self, name: str, database: str = "postgres") -> str:
        node = self.node(name)
        return f"postgresql://postgres@{node.address}:{PG_PORT}/{database}"

    def log_tails(self) -> str:
        return " | ".join(
            f"{node.name}: {self._tail(node.root / 'patroni.out')}"
            for node in self.nodes
        )

    @staticmethod
    def _tail(path: Path) -> str:
        try:
            return path.read_text(errors="replace")[-400:]
        except OSError:
            return ""

    # -- tear-down ---------------------------------------------------------------

    def close(self) -> None:
        """Kill every process started here and remove the folder and namespaces."""
        with contextlib.suppress(Exception):
            self.rejoin()
        for node in self.nodes:
            with contextlib.suppress(Exception):
                self.thaw(node.name)
                self.kill_host(node.name)
        if self.etcd is not None:
            with contextlib.suppress(ProcessLookupError):
                self.etcd.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.etcd.wait(10)
            self.etcd = None
        if self.fabric is not None:
            self.fabric.close()
            self.fabric = None
        shutil.rmtree(self.root, ignore_errors=True)
        if self.record is not None:
            release(self.record)
            self.record = None


def remove_cluster_of(record: OwnerRecord) -> None:
    """Kill what a dead soak's cluster left running under its folder, then remove it."""
    root = Path(str(record["root"]))
    if root.parent != Path(tempfile.gettempdir()) or not root.name.startswith(
        "rulvar-ha-"
    ):
        return  # not a folder this module made: never touch it
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if str(root).encode() in cmdline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry), signal.SIGKILL)
    shutil.rmtree(root, ignore_errors=True)


def _free_port() -> int:
    from rulvar_conformance.faults.pg_cluster import free_port

    return free_port()
