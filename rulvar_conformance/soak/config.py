"""What a soak writer needs to know, shipped to its process in ``RULVAR_SOAK_CONFIG``."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Final

from rulvar_store import StoreBusyError

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_SOAK_RUNS",
    "SoakHooks",
    "SoakWriterConfig",
    "SoakWriterError",
    "default_retryable",
    "owner_of",
]

CONFIG_ENV: Final = "RULVAR_SOAK_CONFIG"
DEFAULT_SOAK_RUNS: Final = ("soak-run-0", "soak-run-1", "soak-run-2")
OTHER_RUN: Final = "soak-other"
"""A run no writer ever leases: every write to it under a soak lease must bounce (F2)."""


AIM_HOLD_S: Final = 0.05
"""How long an aimed writer holds its announced transaction open for the SIGSTOP."""


def aim_path_of(config: SoakWriterConfig) -> str:
    """The file that asks writer ``config.writer`` to announce its next transaction."""
    return os.path.join(
        os.path.dirname(config.stop_path) or ".", f"aim-w{config.writer}"
    )


def owner_of(writer: int, incarnation: int) -> str:
    """The lease owner of one writer incarnation; a respawn never reuses one (S1)."""
    return f"soak-w{writer}.{incarnation}"


@dataclass(frozen=True)
class SoakWriterConfig:
    """One writer incarnation's settings (S1, S7).

    Attributes:
        writer: writer index; with ``incarnation`` it names the owner.
        incarnation: 0 at first spawn, +1 per respawn after a SIGKILL.
        seed: the soak seed; the writer's PRNG is seeded from it and its identity.
        ttl_ms: lease ttl of the handles the writer opens.
        runs: the soak runs the writers share.
        report_path: the writer's JSONL event log.
        stop_path: the writer finishes its tenure and exits once this file exists.
        location_path: dill pickle of the ``StoreLocation`` to open.
        sys_path: the referee's import path, so a store author's modules import.
        companions: threads appending to runs of their own through the writer's
            handle (``soak.companions``), so its calls share the handle.
        outage_s: how long reads keep retrying an unavailable store (a fault
            soak's server outage); 0 keeps the plain bounded rounds.
    """

    writer: int
    incarnation: int
    seed: int
    ttl_ms: int
    runs: tuple[str, ...] = DEFAULT_SOAK_RUNS
    report_path: str = ""
    stop_path: str = ""
    location_path: str = ""
    sys_path: tuple[str, ...] = field(default=())
    companions: int = 0
    outage_s: float = 0.0

    @property
    def owner(self) -> str:
        return owner_of(self.writer, self.incarnation)

    def to_env(self) -> str:
        """The JSON text for ``RULVAR_SOAK_CONFIG``."""
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> SoakWriterConfig:
        """Read the config back from ``RULVAR_SOAK_CONFIG``."""
        text = (environ if environ is not None else dict(os.environ)).get(CONFIG_ENV)
        if not text:
            raise SystemExit(f"soak writer: {CONFIG_ENV} is not set")
        raw = json.loads(text)
        raw["runs"] = tuple(raw["runs"])
        raw["sys_path"] = tuple(raw["sys_path"])
        return cls(**raw)


class SoakWriterError(RuntimeError):
    """A store call failed in a way the protocol does not allow."""


def default_retryable(exc: BaseException) -> bool:
    """Backend contention the writer retries: the typed busy error (S2)."""
    return isinstance(exc, StoreBusyError)


def _sleep_ms(ms: float) -> None:
    time.sleep(ms / 1000.0)


@dataclass
class SoakHooks:
    """What the writer asks of its host: when to stop, what to retry, how to sleep."""

    stop: Callable[[], bool]
    retryable: Callable[[BaseException], bool] = default_retryable
    sleep_ms: Callable[[float], None] = _sleep_ms
