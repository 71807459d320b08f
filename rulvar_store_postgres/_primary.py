"""Following the writable primary of a replicated PostgreSQL (P16-P21).

Every new pooled connection asks its server, in the round trip that sets up
its session, what it is (``ServerState``): in recovery or not, its timeline,
``synchronous_commit``, ``synchronous_standby_names`` and the standbys
streaming to it. ``Cluster`` (one per pool) turns that into decisions, shared
by the sync and asyncio pools:

* a server in recovery (a standby, or a primary being demoted) is refused:
  the connection is closed and the call fails with the retryable
  ``StoreUnavailableError`` (``NotPrimary``), never ``ConfigError``;
* the highest timeline seen is the cluster's: a server on a lower one is a
  primary that a failover has superseded (it kept running, a "zombie"), and
  its connections are refused when made and discarded when next taken from
  the pool, so neither writes nor reads keep answering from it (unless no
  primary on the higher timeline was admitted for ``TIMELINE_TRUST_S``: a
  cluster rebuilt or restored from a backup starts its timelines again);
* hosts are tried in the URL's order at first; then the host of the last
  admitted connection goes to the front (the primary: no wait on standbys or
  a black-holed host before it), and a host whose connection was found
  superseded, read-only, or stalled past a call's deadline goes to the back,
  so the pool reaches a new primary by itself whatever the order in which
  the URL lists the hosts;
* ``replication=required`` refuses (``ConfigError`` naming the fix) a server
  whose acknowledged commits a failover can take back: one that commits
  without waiting for a synchronous standby.

A pooled connection is asked again when it is taken from the pool more than
``PROBE_EVERY_S`` after its last answer: a primary whose synchronous standby
has left (its commits cannot finish; after a failover, the standby became
the new primary), or that had standbys and has none left (asynchronous: they
follow the new primary), is then set aside in favour of another host, at
most once per ``SUSPECT_EVERY_S``. Once one connection reaches a primary on a
higher timeline, every connection to the old one is dropped.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from time import monotonic
from typing import Any, Final

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from rulvar_store.errors import ConfigError

__all__ = [
    "PROBE",
    "PROBE_EVERY_S",
    "SUSPECT_EVERY_S",
    "TIMELINE_TRUST_S",
    "Cluster",
    "NotPrimary",
    "Refused",
    "ReplicationUnconfirmed",
    "ServerState",
    "replication_mode",
]

_log = logging.getLogger("rulvar_store_postgres")

PROBE_EVERY_S: Final = 1.0
# A lower timeline is refused while a primary on the higher one was admitted
# this recently. A zombie outlives its leader key by far less with a watchdog;
# a cluster rebuilt or restored from a backup (timelines start again) is
# accepted after it, without restarting the process.
TIMELINE_TRUST_S: Final = 60.0
# At most one pooled connection per pool is set aside as maybe superseded in
# this time (``Cluster.suspect``).
SUSPECT_EVERY_S: Final = 5.0
# One statement, readable by any role: pg_stat_replication shows a role
# without pg_read_all_stats its standbys' rows with NULL columns (counted as
# hidden: their state is then unknown, never taken for "none").
PROBE: Final = (
    "SELECT pg_is_in_recovery(), "
    "CASE WHEN pg_is_in_recovery() THEN 0 ELSE "
    "('x' || left(pg_walfile_name(pg_current_wal_lsn()), 8))::bit(32)::int END, "
    "current_setting('synchronous_commit'), "
    "current_setting('synchronous_standby_names'), "
    "(SELECT count(*) FROM pg_stat_replication "
    "WHERE sync_state IN ('sync', 'quorum')), "
    "(SELECT count(*) FROM pg_stat_replication), "
    "(SELECT count(*) FROM pg_stat_replication WHERE sync_state IS NULL), "
    "(SELECT backend_start::text FROM pg_stat_activity WHERE pid = pg_backend_pid()), "
    "pg_backend_pid()"
)
_REQUIRED: Final = re.compile(r"\s*(?:FIRST\s+|ANY\s+)?(\d+)\s*\(", re.IGNORECASE)
# synchronous_commit levels that do not wait for any standby.
_LOCAL_COMMITS: Final = frozenset({"off", "local"})
REPLICATION_OPTIONS: Final = ("any", "required")


class NotPrimary(psycopg.OperationalError):
    """The server is not the writable primary: in recovery, or superseded."""


class Refused(psycopg.OperationalError):
    """The server breaks the store's ``replication`` requirement (``config_error``)."""

    def __init__(self, config_error: ConfigError) -> None:
        super().__init__(str(config_error))
        self.config_error = config_error


class ReplicationUnconfirmed(psycopg.OperationalError):
    """The commit's wait for a synchronous standby was cancelled (see ``_commit_notice``)."""


def replication_mode(synchronous_commit: str, standby_names: str) -> str:
    """``async``, ``sync`` or ``quorum``: what a COMMIT waits for before it returns."""
    if not standby_names.strip() or synchronous_commit in _LOCAL_COMMITS:
        return "async"
    return "quorum" if standby_names.strip().upper().startswith("ANY") else "sync"


@dataclass(frozen=True, slots=True)
class ServerState:
    """One server's answer to ``PROBE``."""

    in_recovery: bool
    timeline: int  # 0 in recovery
    synchronous_commit: str
    standby_names: str
    sync_streaming: int  # synchronous (or quorum) standbys connected now
    standbys: int  # standbys connected now
    hidden: int  # standbys whose state this role may not see
    started: str  # this session's backend_start (``_sessions``)
    pid: int = 0  # this session's backend pid, as the server knows it

    @classmethod
    def from_row(cls, row: tuple[Any, ...] | None) -> ServerState:
        assert row is not None
        recovery, timeline, commit, names, sync, standbys, hidden, started = row[:8]
        return cls(
            bool(recovery),
            int(timeline),
            str(commit),
            str(names),
            int(sync),
            int(standbys),
            int(hidden),
            str(started or ""),
            int(row[8]) if len(row) > 8 else 0,
        )

    @property
    def mode(self) -> str:
        return replication_mode(self.synchronous_commit, self.standby_names)

    @property
    def starved(self) -> bool:
        """Synchronous, and fewer synchronous standbys connected than it waits for.

        Its commits cannot finish: the standby is down, or (after a failover)
        was promoted and this server is a superseded primary.
        """
        if self.mode == "async" or self.hidden:
            return False
        found = _REQUIRED.match(self.standby_names)
        return self.sync_streaming < (int(found.group(1)) if found else 1)

    def describe(self) -> str:
        """What a failover can do to this server's acknowledged commits."""
        if self.in_recovery:
            return "standby (in recovery): not the primary"
        seen = (
            f"{self.standbys} standby(s) connected"
            if not self.hidden
            else "standbys not visible to this role (pg_read_all_stats)"
        )
        if self.mode == "async":
            risk = "a failover can lose acknowledged commits, epochs included"
            if not self.hidden and self.standbys == 0:
                # A lone server: nothing to fail over to until a standby is added
                # (or a managed service promotes a replica of its own).
                risk += " (no standby streams from it now)"
            return (
                f"async (synchronous_commit={self.synchronous_commit}, "
                f"synchronous_standby_names={self.standby_names!r}, {seen}): {risk}"
            )
        return (
            f"{self.mode} (synchronous_commit={self.synchronous_commit}, "
            f"synchronous_standby_names={self.standby_names!r}, {seen}, "
            f"{self.sync_streaming} synchronous now): acknowledged commits are on "
            "a synchronous standby"
        )


def _hosts(conninfo: str) -> list[dict[str, str]]:
    """The host entries of ``conninfo`` (host, hostaddr, port), in their order."""
    given = conninfo_to_dict(conninfo)
    names = {
        key: str(given[key]).split(",")
        for key in ("host", "hostaddr", "port")
        if given.get(key) not in (None, "")
    }
    count = max((len(values) for values in names.values()), default=0)
    if count < 2 or any(len(values) not in (1, count) for values in names.values()):
        return []  # one host, or lists libpq itself will refuse: left as written
    entries = []
    for index in range(count):
        entry = {}
        for key, values in names.items():
            # libpq: a single port (or host) applies to every entry.
            entry[key] = values[index] if len(values) == count else values[0]
        entries.append(entry)
    return entries


class Cluster:
    """What one pool knows of the cluster its URL names (see the module text)."""

    def __init__(
        self, conninfo: str, where: str, *, replication: str, fenced: bool
    ) -> None:
        self._base = conninfo
        self._where = where
        self._replication = replication
        self._fenced = fenced
        self._lock = threading.Lock()
        self._order = _hosts(conninfo)
        self.timeline = 0  # the highest seen on a primary
        self._timeline_seen_at = 0.0  # when a primary on it was last admitted
        self._had_standbys = 0  # the timeline on which standbys were last seen
        self._suspected_at = -SUSPECT_EVERY_S  # the last ``suspect`` verdict
        self.last_state: ServerState | None = None
        self._warned = False

    @property
    def hosts(self) -> int:
        """How many hosts the URL names (1 for a single host or none)."""
        return max(1, len(self._order))

    def conninfo(self) -> str:
        """The connection string with the hosts in their current order."""
        with self._lock:
            order = list(self._order)
        if not order:
            return self._base
        joined = {key: ",".join(entry[key] for entry in order) for key in order[0]}
        return make_conninfo(self._base, **joined)

    def demote(
        self, conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]
    ) -> None:
        """Try ``conn``'s host last from now on (superseded, read-only or stalled)."""
        self._move(conn, to_front=False)

    def prefer(
        self, conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]
    ) -> None:
        """Try ``conn``'s host first from now on: it is the primary.

        The hosts before it in the URL were standbys or did not answer (a
        black-holed one costs ``connect_timeout`` per attempt): the next
        connection goes where this one went.
        """
        self._move(conn, to_front=True)

    def _move(
        self,
        conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any],
        *,
        to_front: bool,
    ) -> None:
        if not self._order:
            return
        try:
            host, port = conn.info.host, str(conn.info.port)
            hostaddr = conn.info.hostaddr
        except (psycopg.Error, ValueError, AttributeError):
            return
        names = {host, hostaddr} - {""}
        with self._lock:
            for index, entry in enumerate(self._order):
                same_port = entry.get("port", port) == port
                if same_port and names & {entry.get("host"), entry.get("hostaddr")}:
                    moved = self._order.pop(index)
                    if to_front:
                        self._order.insert(0, moved)
                    else:
                        self._order.append(moved)
                    return

    def admit(self, state: ServerState) -> None:
        """Accept a new connection's server, or raise why not.

        Raises:
            NotPrimary: in recovery, or on a timeline behind the cluster's.
            Refused: ``replication=required`` and commits that do not wait for
                a synchronous standby.
        """
        if state.in_recovery:
            if not self._fenced:
                return  # an observer reads from a standby as well
            raise NotPrimary(
                "the server is in recovery (a standby, or a primary being "
                "demoted): writes go to the primary; retry, the pool tries the "
                "other hosts first"
            )
        with self._lock:
            if (
                state.timeline < self.timeline
                and monotonic() - self._timeline_seen_at < TIMELINE_TRUST_S
            ):
                raise NotPrimary(
                    f"the server is on timeline {state.timeline}, behind timeline "
                    f"{self.timeline} of a primary seen since: it was superseded "
                    "by a failover; retry, the pool tries the other hosts first"
                )
            if state.timeline < self.timeline:
                # No server on the higher timeline for TIMELINE_TRUST_S: the
                # cluster was rebuilt or restored, not failed over.
                _log.warning(
                    "%s: timeline %d was not seen for %.0f s; timeline %d is "
                    "taken as the cluster's",
                    self._where,
                    self.timeline,
                    TIMELINE_TRUST_S,
                    state.timeline,
                )
            self.timeline = state.timeline
            self._timeline_seen_at = monotonic()
            if state.standbys:
                self._had_standbys = state.timeline
            self.last_state = state
        if not self._fenced:
            return
        if self._replication == "required" and state.mode == "async":
            raise Refused(self.refusal(state))
        if state.mode == "async" and state.standbys and not self._warned:
            self._warned = True
            _log.warning(
                "%s: the server replicates asynchronously: %s; open the store with "
                "replication=required to refuse such a server",
                self._where,
                state.describe(),
            )

    def refusal(self, state: ServerState) -> ConfigError:
        return ConfigError(
            f"{self._where}: replication=required, but the server is "
            f"{state.describe()}. Fix the cluster: with Patroni set "
            "synchronous_mode: true and synchronous_mode_strict: true (or "
            "synchronous_mode: quorum); with plain PostgreSQL set "
            "synchronous_standby_names (e.g. 'ANY 1 (s1, s2)') and "
            "synchronous_commit = on; or remove replication=required to accept "
            "that a failover can roll back acknowledged writes and epochs"
        )

    def seen(self, state: ServerState) -> None:
        """A pooled connection's fresh answer: its primary is still on the timeline."""
        if not state.in_recovery and state.timeline == self.timeline:
            self._timeline_seen_at = monotonic()
            if state.standbys:
                self._had_standbys = state.timeline

    def suspect(self, state: ServerState) -> bool:
        """Whether a primary may have been superseded (see ``_pool.set_aside``).

        True at most once per ``SUSPECT_EVERY_S`` per pool.
        """
        if state.in_recovery:
            return False
        orphaned = (
            not state.standbys
            and not state.hidden
            and self._had_standbys == state.timeline
        )
        if not (state.starved or orphaned):
            return False
        with self._lock:
            now = monotonic()
            if now - self._suspected_at < SUSPECT_EVERY_S:
                return False
            self._suspected_at = now
        return True

    def current(self, timeline: int) -> bool:
        """Whether a connection made on ``timeline`` is still on the cluster's.

        0 is a standby's (an observer's connection): not judged by timeline.
        """
        return timeline == 0 or timeline >= self.timeline
