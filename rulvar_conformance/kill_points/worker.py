"""The kill-point worker (CONTRACT K5): a child that drives a run and SIGKILLs itself.

Run as ``python -m rulvar_conformance.kill_points.worker`` with its
configuration, JSON, in ``RULVAR_KILL_POINT_CONFIG``. The configuration carries
the store location's opener (pickled, base64), so the child opens the location
itself with the worker ttl. Two modes: ``scenario`` drives the reference run of
a 9.2 scenario and dies just before or after its matching write; ``store``
performs one store operation and dies at one failpoint inside it (see
``store_level``).

Every event is one JSON line, written with a single unbuffered ``write`` before
the next action, so a SIGKILL never loses an event already reported: ``call``,
``tool``, ``kill``, ``ran-to-completion``, ``fatal`` (and, in store mode,
``lease`` and ``armed``).
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal, cast

from rulvar_conformance.kill_points.driver import ScriptedProvider, run_segment
from rulvar_conformance.kill_points.scenarios import (
    Site,
    scenario_by_id,
    write_point,
)
from rulvar_store import JournalEntry, LeasableStore, Lease, OpenedStore, RunMeta
from rulvar_store.backend import LocationOpener

__all__ = [
    "CONFIG_ENV",
    "CONFIG_ON_STDIN",
    "KillHook",
    "KillPointWorkerConfig",
    "ReportWriter",
    "decode_opener",
    "encode_opener",
    "kill_point_worker_config_from_env",
    "main",
    "read_report",
    "run_kill_point_worker",
    "sigkill_self",
]

CONFIG_ENV: Final = "RULVAR_KILL_POINT_CONFIG"
CONFIG_ON_STDIN: Final = "--config-on-stdin"
"""Worker argument: read the config (the same JSON) from stdin; EOF alone exits."""
Mode = Literal["scenario", "store"]
KillHook = Callable[[], None]


def sigkill_self() -> None:
    """The default kill: SIGKILL this process (no handler, no cleanup runs)."""
    os.kill(os.getpid(), signal.SIGKILL)


@dataclass(frozen=True)
class KillPointWorkerConfig:
    """What a worker needs (K5), JSON-serializable.

    Attributes:
        store_path: the location's name (for messages).
        run_id: the run to drive.
        ttl_ms: the ttl the worker opens the store with.
        report_path: the JSONL event report.
        scenario_id: the 9.2 scenario (scenario mode) or ``<operation>@<point>``.
        opener: the location's opener, ``encode_opener`` text.
        mode: ``scenario`` or ``store``.
    """

    store_path: str
    run_id: str
    ttl_ms: int
    report_path: str
    scenario_id: str
    opener: str = ""
    mode: Mode = "scenario"

    def to_env(self) -> str:
        """The value of ``RULVAR_KILL_POINT_CONFIG`` for this config."""
        return json.dumps(asdict(self))


def kill_point_worker_config_from_env(
    environ: Mapping[str, str] | None = None,
) -> KillPointWorkerConfig:
    """Read the config from ``RULVAR_KILL_POINT_CONFIG``.

    Raises:
        KeyError: the variable is missing.
        ValueError, TypeError: it is not a config's JSON.
    """
    raw = json.loads((os.environ if environ is None else environ)[CONFIG_ENV])
    if not isinstance(raw, dict):
        raise ValueError(f"{CONFIG_ENV} must hold a JSON object")
    return KillPointWorkerConfig(**raw)


def encode_opener(opener: LocationOpener) -> str:
    """Pickle a location opener for a child: plain pickle, else dill (closures)."""
    try:
        data = b"P" + pickle.dumps(opener)
    except (pickle.PicklingError, AttributeError, TypeError):
        import dill

        data = b"D" + dill.dumps(opener, recurse=True)
    return base64.b64encode(data).decode("ascii")


def decode_opener(text: str) -> LocationOpener:
    """Undo ``encode_opener``."""
    data = base64.b64decode(text)
    if data[:1] == b"D":
        import dill

        opener: LocationOpener = dill.loads(data[1:])
    else:
        opener = pickle.loads(data[1:])
    return opener


class ReportWriter:
    """Appends one JSON line per event with one unbuffered write (durable on death)."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def event(self, **fields: Any) -> None:
        os.write(self._fd, (json.dumps(fields) + "\n").encode("utf-8"))

    def call(self, prompt: str) -> None:
        self.event(t="call", prompt=prompt)

    def tool(self, target: str) -> None:
        self.event(t="tool", target=target)

    def close(self) -> None:
        os.close(self._fd)


def read_report(path: str) -> list[dict[str, Any]]:
    """Return the report's events; a torn LAST line (death mid-write) is dropped."""
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.read().split("\n")
    except FileNotFoundError:
        return []
    events: list[dict[str, Any]] = []
    for index, line in enumerate(lines):
        if not line:
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            if index == len(lines) - 1:
                break  # the torn tail of a killed writer
            raise
    return events


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
