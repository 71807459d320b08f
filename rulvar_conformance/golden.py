"""The frozen golden journal of CONTRACT 8.4 and the hash its C5 fold must produce.

Editing the fixture changes the hash; that needs a deliberate version bump of the
kit, because backends certified against the old hash would silently drift.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Final

__all__ = [
    "GOLDEN_FOLD_JOURNAL",
    "GOLDEN_FOLD_STATE_JSON",
    "GOLDEN_FOLD_STATE_SHA256",
    "golden_fold_journal",
    "thaw",
]

_BASE_MS: Final = 1_700_000_000_000


def _iso(ms: int) -> str:
    """Format Unix ms the way JavaScript's ``Date.toISOString`` does."""
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _entry(
    seq: int,
    *,
    kind: str = "external",
    status: str = "suspended",
    scope: str = "",
    ref: int | None = None,
    **payload: Any,
) -> dict[str, Any]:
    entry: dict[str, Any] = {"hashVersion": 2, "seq": seq}
    if ref is not None:
        entry["ref"] = ref
    entry.update(scope=scope, key=f"golden-{seq}", ordinal=0, kind=kind, status=status)
    entry.update(payload)
    entry.update(spanId="golden-span", startedAt=_iso(_BASE_MS + seq * 1000))
    return entry


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({key: _freeze(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_freeze(item) for item in value)
    return value


def thaw(value: Any) -> Any:
    """Return a fresh plain-JSON copy (dicts and lists) of a possibly frozen value."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(item) for item in value]
    return value


_GATE_A_SCHEMA: Final = {
    "type": "object",
    "additionalProperties": False,
    "required": ["ok"],
    "properties": {"ok": {"type": "boolean"}},
}

GOLDEN_FOLD_JOURNAL: Final[tuple[Mapping[str, Any], ...]] = tuple(
    _freeze(entry)
    for entry in (
        _entry(0, kind="agent", status="running"),
        _entry(1, scope="agent:0", value={"key": "gate-a", "schema": _GATE_A_SCHEMA}),
        _entry(2, value={"key": "gate-b"}),
        _entry(
            3,
            kind="resolution",
            status="ok",
            scope="agent:0",
            ref=1,
            resolution={"target": 1, "by": "external", "value": {"ok": "yes"}},
        ),
        _entry(
            4,
            kind="resolution",
            status="ok",
            scope="agent:0",
            ref=1,
            resolution={"target": 1, "by": "operator", "value": {"ok": True}},
        ),
        _entry(
            5,
            kind="resolution",
            status="ok",
            scope="agent:0",
            ref=1,
            resolution={"target": 1, "by": "timeout", "value": {"ok": False}},
        ),
        _entry(
            6,
            kind="abandon",
            status="ok",
            ref=0,
            abandon={"target": 0, "authorizedBy": 0, "reason": "golden abandon"},
        ),
        _entry(
            7,
            kind="resolution",
            status="ok",
            ref=2,
            resolution={"target": 2, "by": "external", "value": {"go": 1}},
        ),
        _entry(
            8,
            kind="abandon",
            status="ok",
            ref=2,
            abandon={
                "target": 2,
                "authorizedBy": 6,
                "reason": "late abandon over a resolved gate",
            },
        ),
        _entry(
            9,
            kind="abandon",
            status="ok",
            ref=0,
            abandon={"target": 0, "authorizedBy": 6, "reason": "repeat abandon"},
        ),
    )
)
"""The ten entries of 8.4, deep-frozen; ``golden_fold_journal()`` gives mutable copies."""

GOLDEN_FOLD_STATE_JSON: Final = (
    '{"abandoned":{"0":true,"1":true,"2":false,"3":true,"4":true,"5":true,'
    '"6":false,"7":false,"8":false,"9":false},"classifications":{"3":'
    '{"classification":"invalid"},"4":{"classification":"applied"},"5":'
    '{"classification":"noop","reason":"already_resolved","supersededBy":4},'
    '"6":{"classification":"applied"},"7":{"classification":"applied"},"8":'
    '{"classification":"noop","reason":"already_resolved","supersededBy":7},'
    '"9":{"classification":"noop","reason":"target_abandoned","supersededBy":9}},'
    '"suspensions":{"1":{"by":4,"state":"resolved","value":{"ok":true}},"2":'
    '{"by":7,"state":"resolved","value":{"go":1}}}}'
)
"""The canonical (C3) fold state of the golden journal, as printed in 8.4."""

GOLDEN_FOLD_STATE_SHA256: Final = (
    "81e6ccff549fb3e6c1de4d34ba65b912162eba6f66403b5d5f23a3e1ec69243c"
)


def golden_fold_journal() -> list[dict[str, Any]]:
    """Return fresh, mutable copies of the golden entries, ready to append."""
    return [thaw(entry) for entry in GOLDEN_FOLD_JOURNAL]
