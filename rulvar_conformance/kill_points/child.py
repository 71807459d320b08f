"""The kill-point child's plumbing: its configuration, the opener it ships, its report.

Shared by the parent (which writes a config and reads the report) and the child
(the worker, and the store-level operations it runs), so neither side imports the
other's module: the worker and ``store_ops`` both build on this one.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import signal
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal

from rulvar_store.backend import LocationOpener

__all__ = [
    "CONFIG_ENV",
    "CONFIG_ON_STDIN",
    "KillHook",
    "KillPointWorkerConfig",
    "Mode",
    "ReportWriter",
    "decode_opener",
    "encode_opener",
    "kill_point_worker_config_from_env",
    "read_report",
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
