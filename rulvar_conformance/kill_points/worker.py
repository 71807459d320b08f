"""The kill-point worker (CONTRACT K5): a child that drives a run and SIGKILLs itself.

Run as ``python -m rulvar_conformance.kill_points.worker`` with its
configuration, JSON, in ``RULVAR_KILL_POINT_CONFIG``. The configuration carries
the store location's opener (pickled, base64), so the child opens the location
itself with the worker ttl. Two modes: ``scenario`` drives the reference run of
a 9.2 scenario and dies just before or after its matching write; ``store``
performs one store operation and dies at one failpoint inside it (see
``store_level``).

The configuration, the opener's encoding and the report live in ``child``,
which the store-level operations (``store_ops``) share without importing this
module. Every event is one JSON line, written with a single unbuffered ``write`` before
the next action, so a SIGKILL never loses an event already reported: ``call``,
``tool``, ``kill``, ``ran-to-completion``, ``fatal`` (and, in store mode,
``lease`` and ``armed``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, cast

from rulvar_conformance.kill_points.child import (
    CONFIG_ENV,
    CONFIG_ON_STDIN,
    KillHook,
    KillPointWorkerConfig,
    ReportWriter,
    decode_opener,
    kill_point_worker_config_from_env,
    sigkill_self,
)
from rulvar_conformance.kill_points.driver import ScriptedProvider, run_segment
from rulvar_conformance.kill_points.scenarios import (
    Site,
    scenario_by_id,
    write_point,
)
from rulvar_store import JournalEntry, LeasableStore, Lease, OpenedStore, RunMeta

__all__ = ["main", "run_kill_point_worker"]


class _KillingJournal:
    """Passes everything through but dies around the scenario's matching write."""

    def __init__(
        self,
        inner: LeasableStore,
        point: str,
        phase: str,
        occurrence: int,
        report: ReportWriter,
        kill: KillHook,
    ) -> None:
        self._inner = inner
        self._point, self._phase, self._occurrence = point, phase, occurrence
        self._seen = 0
        self._report = report
        self._kill = kill

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _matches(self, site: Site, record: Mapping[str, Any]) -> bool:
        if write_point(site, record) != self._point:
            return False
        self._seen += 1
        return self._seen == self._occurrence

    def _die(self, site: Site, record: Mapping[str, Any]) -> None:
        fields: dict[str, Any] = {"point": self._point, "phase": self._phase}
        fields["site"] = site
        for key in ("kind", "status", "seq"):
            if key in record:
                fields[key] = record[key]
        self._report.event(t="kill", **fields)
        self._kill()

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        target = self._matches("append", entry)
        if target and self._phase == "before":
            self._die("append", entry)
        self._inner.append(run_id, entry, lease)
        if target:
            self._die("append", entry)

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        target = self._matches("putMeta", meta)
        if target and self._phase == "before":
            self._die("putMeta", meta)
        self._inner.put_meta(meta, lease)
        if target:
            self._die("putMeta", meta)


def run_kill_point_worker(
    opened: OpenedStore,
    config: KillPointWorkerConfig,
    kill: KillHook = sigkill_self,
) -> None:
    """Drive the scenario's run over ``opened`` and die at its write (K5).

    Returns only when the kill hook returns or the run completes (then a
    ``ran-to-completion`` event is written: the referee calls that a violation).

    Raises:
        KeyError: unknown scenario, before any store call.
    """
    scenario = scenario_by_id(config.scenario_id)
    inner = opened.journal
    if not isinstance(inner, LeasableStore):
        raise TypeError(f"kill-point scenarios need a leasable store, got {inner!r}")
    report = ReportWriter(config.report_path)
    try:
        journal = _KillingJournal(
            inner,
            scenario.point,
            scenario.phase,
            scenario.occurrence,
            report,
            kill,
        )
        outcome = run_segment(
            cast(LeasableStore, journal),  # a proxy with the store's interface
            opened.transcripts,
            config.run_id,
            scenario.workflow,
            ScriptedProvider(report),
        )
        report.event(t="ran-to-completion", status=outcome.status)
    finally:
        report.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m rulvar_conformance.kill_points.worker``.

    With ``--config-on-stdin`` the worker was started ahead of its case: it waits
    for the config on stdin and exits quietly on EOF without one.
    """
    if CONFIG_ON_STDIN in (sys.argv[1:] if argv is None else argv):
        text = sys.stdin.read()
        if not text.strip():
            return 0
        config = kill_point_worker_config_from_env({CONFIG_ENV: text})
    else:
        config = kill_point_worker_config_from_env()
    try:
        opener = decode_opener(config.opener)
        if config.mode == "store":
            from rulvar_conformance.kill_points.store_ops import run_store_child

            run_store_child(opener, config)
            return 0
        scenario_by_id(config.scenario_id)  # unknown: raise before opening anything
        with opener(config.ttl_ms, None, False) as opened:
            run_kill_point_worker(opened, config)
        return 0
    except BaseException as exc:
        report = ReportWriter(config.report_path)
        report.event(t="fatal", message=f"{type(exc).__name__}: {exc}")
        report.close()
        raise


if __name__ == "__main__":
    sys.exit(main())
