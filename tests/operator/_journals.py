"""Journal entries the operator tests write: dispatches, settles, suspensions."""

from __future__ import annotations

from typing import Any

from rulvar_store import JournalStore, Lease, RunMeta


def entry(seq: int, kind: str, status: str, **fields: Any) -> dict[str, Any]:
    return {
        "hashVersion": 2,
        "seq": seq,
        "scope": "",
        "kind": kind,
        "status": status,
        **fields,
    }


def running(seq: int, kind: str = "agent") -> dict[str, Any]:
    return entry(seq, kind, "running")


def terminal(
    seq: int, ref: int, status: str = "ok", kind: str = "agent", **fields: Any
) -> dict[str, Any]:
    return entry(seq, kind, status, ref=ref, **fields)


def settle(seq: int, run_status: str) -> dict[str, Any]:
    return entry(
        seq,
        "decision",
        "ok",
        value={"decisionType": "run_settle", "runStatus": run_status, "segment": 1},
    )


def suspension(seq: int) -> dict[str, Any]:
    return entry(seq, "external", "suspended", value={"key": f"gate-{seq}"})


def resolution(seq: int, target: int) -> dict[str, Any]:
    return entry(
        seq,
        "resolution",
        "ok",
        ref=target,
        resolution={"target": target, "by": "external", "value": {"ok": True}},
    )


def meta(run_id: str, status: str, **extra: Any) -> RunMeta:
    return {
        "runId": run_id,
        "status": status,
        "updatedAt": "2026-01-01T00:00:00.000Z",
        **extra,
    }


def write_run(
    store: JournalStore,
    run_id: str,
    entries: list[dict[str, Any]],
    status: str | None,
    lease: Lease | None = None,
    **extra: Any,
) -> None:
    """Append ``entries`` and, unless ``status`` is None, put a meta with that status."""
    for item in entries:
        store.append(run_id, item, lease)
    if status is not None:
        store.put_meta(meta(run_id, status, **extra), lease)


# Named scenarios: (entries, meta status) -> (verdict, repair_to), per A2.
SCENARIOS: dict[str, tuple[list[dict[str, Any]], str | None, str, str | None]] = {
    "settled-and-matching": (
        [running(0), terminal(1, 0), settle(2, "ok")],
        "ok",
        "consistent",
        None,
    ),
    "no-meta-with-journal": ([running(0)], None, "suspect", None),
    "meta-behind-the-settle": (
        [entry(0, "step", "ok"), settle(1, "ok")],
        "running",
        "meta-behind",
        "ok",
    ),
    "terminal-meta-dispatch-after-settle": (
        [settle(0, "ok"), running(1)],
        "ok",
        "stranded",
        "running",
    ),
    "tail-with-open-suspension": (
        [settle(0, "ok"), suspension(1)],
        "running",
        "meta-behind",
        "suspended",
    ),
    "tail-without-open-suspension": (
        [settle(0, "suspended"), suspension(1), resolution(2, 1)],
        "suspended",
        "meta-behind",
        "running",
    ),
    "terminal-tail-not-terminal": (
        [settle(0, "error"), suspension(1)],
        "error",
        "stranded",
        "suspended",
    ),
    "no-settle-terminal-dangling": ([running(0)], "cancelled", "stranded", "running"),
    "no-settle-ok-open-suspension": ([suspension(0)], "ok", "suspect", None),
    "no-settle-exhausted-open-suspension": (
        [suspension(0)],
        "exhausted",
        "suspect",
        None,
    ),
    "no-settle-error-open-suspension": ([suspension(0)], "error", "consistent", None),
    "no-settle-terminal-clean": (
        [running(0), terminal(1, 0)],
        "ok",
        "consistent",
        None,
    ),
    "no-settle-non-terminal": ([running(0)], "running", "consistent", None),
    "settle-superseded-by-later-settle": (
        [settle(0, "ok"), running(1), terminal(2, 1), settle(3, "error")],
        "error",
        "consistent",
        None,
    ),
}
