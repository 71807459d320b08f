"""One writer of the failover soak: tenures of leased appends through a multi-host URL.

Run as ``python -m rulvar_conformance.faults.failover_writer`` (on its own
network namespace host), configured by ``RULVAR_FAILOVER_WRITER`` (JSON, see
``WriterConfig``). It loops until its stop file appears: acquire a random run,
read its tail, append a few entries under the lease (each carrying a unique
nonce, the epoch and the owner), then release it or walk away (the lease lapses
and another writer takes the run over at a higher epoch).

Every call is logged before (``invoke``) and after (``grant``, ``held``,
``accept``, ``fence-kick``, ``order``, ``released``, ``unknown``, ``error``) in
the soak's JSONL format (``soak.events``), with the host-wide monotonic clock, so
the judge lines the calls up with the faults. A ``StoreUnavailableError`` is an
unknown outcome: never retried (a retry could apply the call twice); the judge
resolves it from the surviving cluster. Any other exception is logged with its
class and whether it is one of the store's typed errors, and the writer goes on.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any, Final

from rulvar_conformance.soak.events import FileSink, monotonic_ns
from rulvar_store import (
    JournalOrderViolation,
    LeaseHeldError,
    RulvarError,
    StoreUnavailableError,
    open_store,
)

__all__ = ["ENV", "WriterConfig", "main"]

BACKOFF_S: Final = (0.1, 0.2)

ENV: Final = "RULVAR_FAILOVER_WRITER"
PAUSE_S: Final = (0.01, 0.04)
"""Between two calls: a modest load on a 2-core machine, many acknowledgements a second."""


@dataclass(frozen=True)
class WriterConfig:
    """What one writer process needs (``to_env``/``from_env`` as JSON)."""

    url: str
    writer: int
    runs: tuple[str, ...]
    ttl_ms: int
    log: str
    stop: str
    seed: int

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls) -> WriterConfig:
        raw = json.loads(os.environ[ENV])
        raw["runs"] = tuple(raw["runs"])
        return cls(**raw)


class _Writer:
    def __init__(self, config: WriterConfig, sink: FileSink, store: Any) -> None:
        self.config, self.sink, self.store = config, sink, store
        self.rng = random.Random(config.seed * 7_919 + config.writer)
        self.owner = f"fw{config.writer}-{os.getpid()}"
        self.calls = 0

    def emit(self, kind: str, **fields: Any) -> None:
        self.sink({"t": kind, "w": self.config.writer, "ns": monotonic_ns(), **fields})

    def call(
        self, op: str, fn: Callable[[], Any], **fields: Any
    ) -> tuple[str, str, Any]:
        """Invoke, run once, classify: (id, outcome, value)."""
        self.calls += 1
        op_id = f"w{self.config.writer}-{self.calls}"
        self.emit("invoke", id=op_id, op=op, **fields)
        try:
            return op_id, "ok", fn()
        except LeaseHeldError:
            return op_id, "lease", None
        except JournalOrderViolation:
            return op_id, "order", None
        except StoreUnavailableError as exc:
            self.emit("unknown", id=op_id, op=op, detail=str(exc)[:200], **fields)
            return op_id, "unknown", None
        except Exception as exc:  # logged and judged: the soak must see every kind
            self.emit(
                "error", id=op_id, op=op, exc=type(exc).__name__,
                typed=isinstance(exc, RulvarError), detail=str(exc)[:300], **fields,
            )  # fmt: skip
            return op_id, "error", None

    def pause(self) -> None:
        time.sleep(self.rng.uniform(*PAUSE_S))

    def tenure(self) -> None:
        run_id = self.rng.choice(self.config.runs)
        journal = self.store.journal
        op_id, outcome, lease = self.call(
            "acquire", lambda: journal.acquire(run_id, self.owner), run=run_id
        )
        if outcome != "ok":
            if outcome == "lease":
                self.emit("held", id=op_id, run=run_id)
                self.pause()
            else:  # no primary now: a short back-off, not a tight loop of failures
                time.sleep(self.rng.uniform(*BACKOFF_S))
            return
        self.emit("grant", id=op_id, run=run_id, epoch=lease.epoch, owner=self.owner)
        op_id, outcome, entries = self.call(
            "load", lambda: journal.load(run_id), run=run_id
        )
        if outcome != "ok":
            return  # the lease lapses by itself
        self.emit("loaded", id=op_id, run=run_id, entries=len(entries))
        tail = max(
            (e["seq"] for e in entries if isinstance(e.get("seq"), int)), default=0
        )
        for counter in range(self.rng.randint(4, 12)):
            if _stopped(self.config):
                break
            self.pause()
            nonce = f"w{self.config.writer}-{os.getpid()}-e{lease.epoch}-c{counter}"
            entry: dict[str, Any] = {
                "seq": tail + 1,
                "kind": "step",
                "status": "ok",
                "value": {"nonce": nonce, "epoch": lease.epoch, "owner": self.owner},
            }
            fields = {
                "run": run_id,
                "epoch": lease.epoch,
                "seq": tail + 1,
                "nonce": nonce,
            }
            op_id, outcome, _ = self.call(
                "append", partial(journal.append, run_id, entry, lease), **fields
            )
            if outcome == "ok":
                tail += 1
                self.emit("accept", id=op_id, **fields)
                continue
            if outcome == "lease":
                self.emit("fence-kick", id=op_id, **fields)
            elif outcome == "order":
                self.emit("order", id=op_id, **fields)
            return
        if self.rng.random() < 0.6:
            op_id, outcome, _ = self.call(
                "release", lambda: journal.release(lease), run=run_id, epoch=lease.epoch
            )
            if outcome == "ok":
                self.emit("released", id=op_id, run=run_id, epoch=lease.epoch)
            elif outcome == "lease":
                self.emit("fence-kick", id=op_id, run=run_id, epoch=lease.epoch)

    def run(self) -> None:
        self.emit("start", owner=self.owner, pid=os.getpid())
        while not _stopped(self.config):
            self.tenure()
        self.emit("done")


_PARENT: Final = os.getppid()


def _stopped(config: WriterConfig) -> bool:
    """The stop file exists, or the soak that started this writer is gone (a writer
    must never outlive it: nothing else would stop it)."""
    return os.path.exists(config.stop) or os.getppid() != _PARENT


def _open(config: WriterConfig, sink: FileSink) -> Any:
    """Open the store, retrying while the cluster has no primary (bounded by the stop file)."""
    while True:
        try:
            return open_store(config.url, ttl_ms=config.ttl_ms)
        except StoreUnavailableError as exc:
            sink(
                {
                    "t": "open-retry",
                    "w": config.writer,
                    "ns": monotonic_ns(),
                    "detail": str(exc)[:200],
                }
            )
            if _stopped(config):
                return None
            time.sleep(0.2)


def main() -> int:
    config = WriterConfig.from_env()
    sink = FileSink(config.log)
    try:
        opened = _open(config, sink)
        if opened is None:
            return 0
        try:
            _Writer(config, sink, opened).run()
        finally:
            opened.close()
    except BaseException as exc:
        sink(
            {
                "t": "fatal",
                "w": config.writer,
                "ns": monotonic_ns(),
                "detail": repr(exc)[:1000],
            }
        )
        raise
    finally:
        sink.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
