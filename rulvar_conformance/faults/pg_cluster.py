"""A private PostgreSQL cluster the fault soaks may cut off, kill and restart.

A fault soak never touches the user's server: it ``initdb``s a data directory
under a temporary folder and runs its own postmaster there, listening on one
address of the soak's choosing (a veth bridge that exists only for the soak,
or loopback for the proxy fallback) and on a unix socket in the same folder,
which the referee uses. As root, the cluster runs as the ``postgres`` user
(``initdb`` refuses root).

Server-side TCP keepalives and ``tcp_user_timeout`` are short, so a backend
whose client host was cut off notices and exits instead of holding its
connection slot (and any row lock) forever: the soak counts leaked connections.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from rulvar_conformance.faults._leftovers import OwnerRecord, claim, release, sweep
from rulvar_conformance.harness.processes import run_tool
from rulvar_store import ConfigError

__all__ = ["PrivateCluster", "find_pg_bin", "free_port"]

PG_BIN_CANDIDATES: Final = tuple(
    f"/usr/lib/postgresql/{version}/bin" for version in range(18, 11, -1)
)
START_WAIT_S: Final = 60
SERVER_SETTINGS: Final = {
    "fsync": "on",
    "synchronous_commit": "on",
    "max_connections": "200",
    "shared_buffers": "16MB",
    # A cut-off client host is noticed within seconds, not the kernel's hours.
    "tcp_keepalives_idle": "1",
    "tcp_keepalives_interval": "1",
    "tcp_keepalives_count": "3",
    "tcp_user_timeout": "3000",
    "log_min_messages": "warning",
}


def free_port() -> int:
    """A TCP port nothing listens on now (the cluster binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def find_pg_bin() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``: ``$RULVAR_PG_BIN``, PATH or Debian's."""
    configured = os.environ.get("RULVAR_PG_BIN")
    if configured:
        return Path(configured)
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).parent
    for candidate in PG_BIN_CANDIDATES:
        if (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    return None


def _run_as() -> list[str]:
    """``runuser -u postgres --`` as root (initdb refuses root), else nothing."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise ConfigError(
            "a private PostgreSQL cluster cannot run as root and there is no "
            "'postgres' user to run it as"
        ) from None
    return ["runuser", "-u", "postgres", "--"]


@dataclass
class PrivateCluster:
    """One throwaway cluster: ``start()``, fault it, ``destroy()``.

    Attributes:
        address: the TCP address it listens on (writers reach it there).
        port: its TCP port (also names the unix socket).
        settings: server settings over ``SERVER_SETTINGS`` (a test's seeded
            defect: ``synchronous_commit=off`` acknowledges before the WAL is out).
    """

    address: str
    port: int
    settings: dict[str, str] = field(default_factory=dict)
    root: Path = field(
        default_factory=lambda: Path(tempfile.mkdtemp(prefix="rulvar-pg-"))
    )
    started: bool = False
    record: Path | None = None

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> str:
        return str(self.root)

    def _bin(self, name: str) -> str:
        folder = find_pg_bin()
        if folder is None:
            raise ConfigError(
                "no PostgreSQL server binaries found (initdb, pg_ctl): install the "
                "server package or set RULVAR_PG_BIN to their folder"
            )
        return str(folder / name)

    def _as_owner(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        return run_tool([*_run_as(), *argv], START_WAIT_S + 30)

    def init(self) -> None:
        """``initdb`` the data directory (no fsync at init: it is thrown away after).

        Clusters of soaks that died without destroying theirs go first (``_leftovers``).
        """
        sweep("pg", remove_cluster_of)
        self.record = claim("pg", self.root.name, root=str(self.root), port=self.port)
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
        done = self._as_owner(
            [
                self._bin("initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            ]
        )
        if done.returncode != 0:
            raise ConfigError(
                f"initdb of the private cluster failed: {done.stderr[-800:]}"
            )
        # initdb trusts loopback only; the writer hosts sit on the soak's own bridge.
        with (self.data / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {self.address}/24 trust\n")

    def start(self) -> None:
        """Start (or restart after a kill: crash recovery replays the WAL) and wait."""
        options = " ".join(
            [
                f"-c listen_addresses='{self.address}'",
                f"-p {self.port}",
                f"-c unix_socket_directories='{self.socket_dir}'",
                *(
                    f"-c {key}={value}"
                    for key, value in {**SERVER_SETTINGS, **self.settings}.items()
                ),
            ]
        )
        done = self._as_owner(
            [
                self._bin("pg_ctl"),
                "-D",
                str(self.data),
                "-o",
                options,
                "-l",
                str(self.root / "server.log"),
                "-w",
                "-t",
                str(START_WAIT_S),
                "start",
            ]
        )
        if done.returncode != 0:
            raise ConfigError(
                f"the private cluster did not start: {done.stdout[-400:]} "
                f"{self.log_tail()}"
            )
        self.started = True

    def log_tail(self) -> str:
        try:
            return (self.root / "server.log").read_text(errors="replace")[-800:]
        except FileNotFoundError:
            return ""

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (FileNotFoundError, ValueError):
            return None

    def kill(self) -> int:
        """SIGKILL the postmaster and every backend at once (a crashed server host).

        Returns how many server processes were killed. The next ``start()``
        runs crash recovery.
        """
        pid = self.postmaster_pid()
        if pid is None:
            return 0
        victims = [pid, *_children_of(pid)]
        for victim in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)
        _wait_gone(victims)
        # Every server process is dead, but a container's init may not have reaped
        # the postmaster yet, and a zombie's pid still looks alive to the next
        # postmaster: the lock files are stale, as after a host crash and reboot.
        (self.data / "postmaster.pid").unlink(missing_ok=True)
        (self.root / f".s.PGSQL.{self.port}.lock").unlink(missing_ok=True)
        self.started = False
        return len(victims)

    def stop(self, mode: str = "fast") -> None:
        if self.postmaster_pid() is None:
            return
        self._as_owner(
            [self._bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"]
        )
        self.started = False

    def destroy(self) -> None:
        """Stop the server (immediately) and remove its folder."""
        try:
            self.stop("immediate")
        finally:
            pid = self.postmaster_pid()
            if pid is not None:  # pg_ctl could not stop it: do not leave it running
                self.kill()
            shutil.rmtree(self.root, ignore_errors=True)
            if self.record is not None:
                release(self.record)
                self.record = None

    def client_backends(self) -> list[tuple[object, ...]]:
        """Every client connection the server holds, but the one asking."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as conn:
            return conn.execute(
                "SELECT pid, client_addr::text, state, left(query, 80) "
                "FROM pg_stat_activity WHERE backend_type = 'client backend' "
                "AND pid <> pg_backend_pid()"
            ).fetchall()

    def url(self, database: str = "postgres", *, host: bool = True) -> str:
        """A URL of the cluster; ``host=False`` leaves host and port to PGHOST/PGPORT."""
        if not host:
            return f"postgresql://postgres@/{database}"
        return (
            f"postgresql://postgres@/{database}?host={self.socket_dir}&port={self.port}"
        )


def remove_cluster_of(record: OwnerRecord) -> None:
    """Stop the postmaster of the cluster ``record`` names and remove its folder."""
    root = Path(str(record["root"]))
    if root.parent != Path(tempfile.gettempdir()) or not root.name.startswith(
        "rulvar-pg-"
    ):
        return  # not a folder this module made: never remove it
    PrivateCluster("127.0.0.1", int(record["port"]), root=root).destroy()


def _children_of(pid: int) -> list[int]:
    """Direct children of ``pid`` (the postmaster forks every backend itself)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # The command name sits in parentheses and may hold spaces: split after it.
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and fields[1] == str(pid):
            found.append(int(entry))
    return found


def _wait_gone(pids: list[int], limit_s: float = 10.0) -> None:
    """Until no pid is alive (reaped by init, since we are not their parent)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        alive = [
            pid for pid in pids if Path(f"/proc/{pid}").exists() and not _zombie(pid)
        ]
        if not alive:
            return
        time.sleep(0.01)


def _zombie(pid: int) -> bool:
    try:
        return (
            Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] == "Z"
        )
    except OSError:
        return False
