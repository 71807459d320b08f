"""The reference run driver (CONTRACT 9.1, K1-K4, A7-A9): a scripted engine in miniature.

It stands in for the engine in the kill-point scenarios: one *segment* acquires the
run's lease, renews it on a thread, writes the running meta, runs a workflow whose
agent calls dispatch deterministically over the journal (replay, rerun,
redispatch, live), settles the run in the journal before the terminal meta write
and releases the lease. Every durable write carries the lease, so it works over
any leasable store that passes the kit.

A ``BaseException`` that is not an ``Exception`` (the in-process stand-in for a
SIGKILL) leaves the segment exactly as a dead process would: no release, no
settle, no meta.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Final

from rulvar_conformance.kill_points.provider import (
    AgentResult,
    ProviderEvents,
    ScriptedProvider,
    prompt_key,
)
from rulvar_store import (
    DEFAULT_LEASE_TTL_MS,
    JournalEntry,
    LeasableStore,
    Lease,
    LeaseHeldError,
    LeaseKeeper,
    RunMeta,
    SettlementError,
    SupersededError,
    TranscriptStore,
)
from rulvar_store.backend import stable_stringify
from rulvar_store.ops import last_run_settle

__all__ = [
    "KP_HAPPY",
    "KP_LIMIT",
    "WORKFLOWS",
    "AgentResult",
    "ProviderEvents",
    "ScriptedProvider",
    "SegmentOutcome",
    "Workflow",
    "prompt_key",
    "run_segment",
]

KP_HAPPY: Final = "kp-happy"
KP_LIMIT: Final = "kp-limit"
SPAN_ID: Final = "kp-span"


def _now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class _Segment:
    """One segment's view of the run: journal, lease, bindings consumed so far."""

    store: LeasableStore
    transcripts: TranscriptStore
    run_id: str
    lease: Lease
    provider: ScriptedProvider
    keeper: LeaseKeeper
    entries: list[JournalEntry]
    appended: int = 0
    consumed: set[int] = field(default_factory=set)

    def next_seq(self) -> int:
        seqs = [e["seq"] for e in self.entries if isinstance(e.get("seq"), int)]
        return max(seqs) + 1 if seqs else 0

    def append(self, entry: JournalEntry) -> int:
        entry = {"hashVersion": 2, "seq": self.next_seq(), **entry}
        self.store.append(self.run_id, entry, self.lease)
        self.entries.append(entry)
        self.appended += 1
        return int(entry["seq"])

    def call(self, prompt: str, turn: int) -> dict[str, Any]:
        """One provider call; a lost lease cancels the segment first (K1, L10).

        Lost means a renewal was refused, or none succeeded before the lease's
        expiry by this process's clock (``LeaseKeeper``): a segment resumed
        after a pause past the ttl stops here too.
        """
        self.keeper.ensure_owned()
        return self.provider.complete(prompt, turn)

    def settled_ok(self) -> bool:
        settle = last_run_settle(self.entries)
        return settle is not None and settle.run_status == "ok"

    def terminal_of(self, running_seq: int) -> JournalEntry | None:
        for entry in self.entries:
            if (
                entry.get("kind") == "agent"
                and entry.get("ref") == running_seq
                and entry.get("status") != "running"
            ):
                return entry
        return None

    def agent(
        self, prompt: str, *, max_turns: int = 4, max_tool_calls: int = 0
    ) -> AgentResult:
        """Dispatch one agent call over the journal (K2)."""
        key = prompt_key(prompt)
        candidates = [
            int(e["seq"])
            for e in self.entries
            if e.get("kind") == "agent"
            and e.get("status") == "running"
            and e.get("key") == key
            and int(e["seq"]) not in self.consumed
        ]
        start: Mapping[str, int] = {}
        if candidates:
            running_seq = candidates[-1]
            self.consumed.add(running_seq)
            terminal = self.terminal_of(running_seq)
            if terminal is not None and (
                terminal.get("status") == "ok" or self.settled_ok()
            ):
                return AgentResult(str(terminal["status"]), terminal.get("value"))
            if terminal is None:  # dangling: redispatch from its checkpoint
                blob = self.transcripts.get(self._ckpt(running_seq))
                start = json.loads(blob) if blob is not None else {}
            else:  # a non-ok terminal in a run never settled ok: rerun
                running_seq = self._dispatch(prompt, key)
        else:
            running_seq = self._dispatch(prompt, key)
        return self._live(prompt, key, running_seq, start, max_turns, max_tool_calls)

    def _ckpt(self, running_seq: int) -> str:
        return f"{self.run_id}/ckpt/{running_seq}"

    def _dispatch(self, prompt: str, key: str) -> int:
        seq = self.append(
            {
                "scope": "",
                "key": key,
                "ordinal": 0,
                "kind": "agent",
                "status": "running",
                "value": {"prompt": prompt},
                "spanId": SPAN_ID,
                "startedAt": _now_iso(),
            }
        )
        self.consumed.add(seq)
        return seq

    def _live(
        self,
        prompt: str,
        key: str,
        running_seq: int,
        start: Mapping[str, int],
        max_turns: int,
        max_tool_calls: int,
    ) -> AgentResult:
        turns = int(start.get("turns", 0))
        tools_used = int(start.get("toolCallsUsed", 0))
        status, value, usage = "limit", None, None
        while turns < max_turns:
            turns += 1
            reply = self.call(prompt, turns)
            usage = reply["usage"]
            if "text" in reply:
                status, value = "ok", reply["text"]
                break
            if tools_used >= max_tool_calls:
                break  # the tool budget is spent: the agent ends at its limit
            tools_used += 1
            evidence = self.provider.probe(str(reply["args"]["target"]))
            checkpoint = {"turns": turns, "toolCallsUsed": tools_used}
            self.transcripts.put(
                self._ckpt(running_seq),
                stable_stringify({**checkpoint, "evidence": evidence}).encode(),
                self.lease,
            )
        self.append(
            {
                "scope": "",
                "key": key,
                "ordinal": 0,
                "kind": "agent",
                "status": status,
                "ref": running_seq,
                "value": value,
                "usage": usage,
                "spanId": SPAN_ID,
                "startedAt": _now_iso(),
            }
        )
        return AgentResult(status, value)


Workflow = Callable[[_Segment], Any]


def _happy(segment: _Segment) -> Any:
    one = segment.agent("step one").value
    two = segment.agent("step two").value
    return {"one": one, "two": two}


def _limit(segment: _Segment) -> Any:
    result = segment.agent("probe until the cap", max_turns=4, max_tool_calls=2)
    return {"agentStatus": result.status}


WORKFLOWS: Final[Mapping[str, Workflow]] = {KP_HAPPY: _happy, KP_LIMIT: _limit}
"""The two kill-point workflows (K4) by name."""


@dataclass(frozen=True)
class SegmentOutcome:
    """A settled segment: run status, the workflow's value, the segment number."""

    status: str
    value: Any
    segment: int


def _running_meta(before: RunMeta | None, run_id: str, workflow: str) -> RunMeta:
    base = dict(before) if before is not None else {"genesis": os.urandom(13).hex()}
    segments = int(base.get("segments", 0)) + 1
    return {
        **base,
        "runId": run_id,
        "status": "running",
        "segments": segments,
        "updatedAt": _now_iso(),
        "workflowName": workflow,
    }


def _settle(segment: _Segment, meta: RunMeta, status: str, value: Any) -> None:
    """Append the settle when something changed (A7, A8), then the terminal meta (A9)."""
    settle = last_run_settle(segment.entries)
    changed = (
        segment.appended > 0
        or (settle is not None and settle.run_status != status)
        or (settle is None and bool(segment.entries))
    )
    run_id = segment.run_id
    if changed:
        output_hash = hashlib.sha256(stable_stringify(value).encode()).hexdigest()
        try:
            segment.append(
                {
                    "scope": "",
                    "key": "run_settle",
                    "ordinal": 0,
                    "kind": "decision",
                    "status": "ok",
                    "value": {
                        "decisionType": "run_settle",
                        "runStatus": status,
                        "segment": meta["segments"],
                        "outputHash": output_hash,
                    },
                    "spanId": SPAN_ID,
                    "startedAt": _now_iso(),
                }
            )
        except LeaseHeldError as exc:
            raise SupersededError(
                f"run {run_id!r}: the settle append was fenced out; a successor "
                "owns the run",
                run_id,
                status,
            ) from exc
        except Exception as exc:
            raise SettlementError(
                f"run {run_id!r}: the settle append failed: {exc}",
                run_id,
                status,
                "run-settle",
            ) from exc
    try:
        segment.store.put_meta(
            {**meta, "status": status, "updatedAt": _now_iso()}, segment.lease
        )
    except LeaseHeldError:
        pass  # the outcome is journaled; the projection belongs to the holder now
    except Exception as exc:
        raise SettlementError(
            f"run {run_id!r}: the terminal meta write failed: {exc}",
            run_id,
            status,
            "meta",
        ) from exc


def run_segment(
    store: LeasableStore,
    transcripts: TranscriptStore,
    run_id: str,
    workflow: str,
    provider: ScriptedProvider,
    *,
    owner: str | None = None,
) -> SegmentOutcome:
    """Drive one segment of ``run_id`` through ``workflow`` to its settle (K1).

    Raises:
        LeaseHeldError: the run is leased by a live owner (nothing was written),
            or the lease was lost mid-run (a failed renew cancels the next call).
        SupersededError, SettlementError: the settle failed (A9).
        KeyError: ``workflow`` is not one of ``WORKFLOWS``.
    """
    body = WORKFLOWS[workflow]
    since = time.monotonic()  # the lease expires ttl after this at the latest
    lease = store.acquire(run_id, owner or f"kp-{os.getpid()}")
    ttl_ms = getattr(store, "lease_ttl_ms", DEFAULT_LEASE_TTL_MS)
    renewer = LeaseKeeper(store.renew, lease, ttl_ms, since=since)
    try:
        entries = store.load(run_id)
        meta = _running_meta(_read_meta(store, run_id), run_id, workflow)
        store.put_meta(meta, lease)
        segment = _Segment(
            store, transcripts, run_id, lease, provider, renewer, entries
        )
        value = body(segment)
        _settle(segment, meta, "ok", value)
    except Exception:
        renewer.stop()
        with suppress(Exception):
            store.release(lease)
        raise
    except BaseException:
        renewer.stop()  # a simulated death: the lease stays, as a dead process's would
        raise
    renewer.stop()
    with suppress(Exception):
        store.release(lease)
    return SegmentOutcome("ok", value, int(meta["segments"]))


def _read_meta(store: LeasableStore, run_id: str) -> RunMeta | None:
    get_meta = getattr(store, "get_meta", None)
    if callable(get_meta):
        found: RunMeta | None = get_meta(run_id)
        return found
    return next((m for m in store.list_runs() if m.get("runId") == run_id), None)
