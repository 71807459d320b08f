"""The minimal resolution fold of CONTRACT C5: who closed which suspension.

The port has no kernel, so this fold stands in for it. It lives beside the SPI
because the audit (section 11) counts open suspensions with it and the SPI never
imports the kit; the kit's ``rulvar_conformance.fold`` re-exports it for the
journal checks and the golden fixture, so both read a journal one way. It walks entries
in journal order, classifies every ``resolution`` and ``abandon`` entry as
``applied``, ``noop`` or ``invalid`` (first closing entry wins), tracks which
entries an abandon covered, and materializes a canonical state whose sha256 is
comparable across languages (C3).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from rulvar_store._json import stable_stringify
from rulvar_store._records import finite_seq
from rulvar_store.errors import JournalOrderViolation

__all__ = [
    "Classification",
    "ResolutionFold",
    "Seq",
    "classify",
    "fold_journal",
    "fold_state",
    "fold_state_sha256",
]

Seq = int | float
Verdict = Literal["applied", "noop", "invalid"]
NoopReason = Literal["target_abandoned", "already_resolved"]

_REF_KINDS: Final = ("resolution", "abandon")
_NO_SCHEMA: Final = object()


@dataclass(frozen=True, slots=True)
class Classification:
    """How one ``resolution``/``abandon`` entry landed (C5 steps 3-4)."""

    verdict: Verdict
    superseded_by: Seq | None = None
    reason: NoopReason | None = None

    def to_state(self) -> dict[str, Any]:
        if self.verdict != "noop":
            return {"classification": self.verdict}
        return {
            "classification": "noop",
            "supersededBy": self.superseded_by,
            "reason": self.reason,
        }


@dataclass(slots=True)
class _Target:
    entry: dict[str, Any]
    closed_by: Seq | None = None
    closed_kind: Literal["resolution", "abandon"] | None = None
    value: Any = None


@dataclass(slots=True)
class ResolutionFold:
    """The result of folding one journal; ``state()`` is what gets hashed."""

    classifications: dict[Seq, Classification] = field(default_factory=dict)
    covered: dict[Seq, bool] = field(default_factory=dict)
    _targets: dict[Seq, _Target] = field(default_factory=dict)
    _entries: dict[Seq, dict[str, Any]] = field(default_factory=dict)

    def suspension_state(self, seq: Seq) -> dict[str, Any]:
        """Return the C5 step-5 state of the suspension at ``seq``."""
        target = self._targets[seq]
        if target.closed_by is None:
            state: dict[str, Any] = {"state": "suspended"}
            if "deadlineAt" in target.entry:
                state["deadlineAt"] = target.entry["deadlineAt"]
            return state
        if target.closed_kind == "abandon":
            return {"state": "abandoned", "by": target.closed_by}
        return {"state": "resolved", "by": target.closed_by, "value": target.value}

    def open_suspensions(self) -> list[Seq]:
        """Return the seqs of suspensions neither closed nor covered, in seq order."""
        return sorted(
            seq
            for seq, target in self._targets.items()
            if target.closed_by is None and not self.covered[seq]
        )

    def state(self) -> dict[str, Any]:
        """Materialize ``{classifications, suspensions, abandoned}`` (C5 step 6)."""
        return {
            "classifications": {
                _key(seq): item.to_state() for seq, item in self.classifications.items()
            },
            "suspensions": {
                _key(seq): self.suspension_state(seq) for seq in self._targets
            },
            "abandoned": {_key(seq): flag for seq, flag in self.covered.items()},
        }


def _plain(value: Any) -> Any:
    """A fresh plain-JSON copy (dicts and lists) of a possibly frozen value."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _key(seq: Seq) -> str:
    return str(seq)


def _scope_of(entry: Mapping[str, Any]) -> str:
    scope = entry.get("scope")
    return scope if isinstance(scope, str) else ""


def _child_prefix(entry: Mapping[str, Any], seq: Seq) -> str:
    value = entry.get("value")
    if entry.get("kind") == "child" and isinstance(value, Mapping):
        child_scope = value.get("childScope")
        if isinstance(child_scope, str):
            return child_scope
    scope = _scope_of(entry)
    segment = f"agent:{seq}"
    return f"{scope}/{segment}" if scope else segment


class _Walk:
    """Mutable state of one fold: covered seqs and scope prefixes, open targets."""

    def __init__(self, entries: list[dict[str, Any]]) -> None:
        self.entries = entries
        self.fold = ResolutionFold()
        self.covered_seqs: set[Seq] = set()
        self.prefixes: list[str] = []
        for entry in entries:
            seq = finite_seq(entry)
            if seq is None:
                continue
            if seq in self.fold._entries:
                raise JournalOrderViolation(f"fold: seq {seq} appears twice", seq=seq)
            self.fold._entries[seq] = entry
            if entry.get("status") == "suspended":
                self.fold._targets[seq] = _Target(entry)

    def is_covered(self, seq: Seq) -> bool:
        if seq in self.covered_seqs:
            return True
        scope = _scope_of(self.fold._entries[seq])
        return any(
            scope == prefix or scope.startswith(prefix + "/")
            for prefix in self.prefixes
        )

    def target_at(self, entry: dict[str, Any]) -> tuple[Seq, Seq]:
        """Return (own seq, ref) after the step-2 checks."""
        seq = finite_seq(entry)
        ref = entry.get("ref")
        if (
            seq is None
            or isinstance(ref, bool)
            or not isinstance(ref, int | float)
            or not ref < seq
            or ref not in self.fold._entries
        ):
            raise JournalOrderViolation(
                f"fold: {entry.get('kind')} entry at seq {seq!r} has ref {ref!r}, "
                "which is not an earlier seq of this journal",
                seq=seq,
            )
        return seq, ref

    def resolve(self, seq: Seq, ref: Seq, entry: Mapping[str, Any]) -> Classification:
        target = self.fold._targets.get(ref)
        if target is None:
            return Classification("invalid")
        if self.is_covered(ref):
            by = target.closed_by if target.closed_by is not None else seq
            return Classification("noop", by, "target_abandoned")
        if target.closed_by is not None:
            reason: NoopReason = (
                "target_abandoned"
                if target.closed_kind == "abandon"
                else "already_resolved"
            )
            return Classification("noop", target.closed_by, reason)
        resolution = entry.get("resolution")
        if not isinstance(resolution, Mapping):
            return Classification("invalid")
        value = resolution.get("value")
        target_value = target.entry.get("value")
        schema = (
            target_value.get("schema", _NO_SCHEMA)
            if isinstance(target_value, Mapping)
            else _NO_SCHEMA
        )
        if schema is not _NO_SCHEMA and not _valid(schema, value):
            return Classification("invalid")
        target.closed_by, target.closed_kind, target.value = seq, "resolution", value
        return Classification("applied")

    def abandon(self, seq: Seq, ref: Seq) -> Classification:
        if self.is_covered(ref):
            return Classification("noop", seq, "target_abandoned")
        target = self.fold._targets.get(ref)
        if target is not None and target.closed_by is not None:
            return Classification("noop", target.closed_by, "already_resolved")
        self.covered_seqs.add(ref)
        self.prefixes.append(_child_prefix(self.fold._entries[ref], ref))
        for target_seq, open_target in self.fold._targets.items():
            if open_target.closed_by is None and self.is_covered(target_seq):
                open_target.closed_by, open_target.closed_kind = seq, "abandon"
        return Classification("applied")

    def run(self) -> ResolutionFold:
        for entry in self.entries:
            kind = entry.get("kind")
            if kind not in _REF_KINDS:
                continue
            seq, ref = self.target_at(entry)
            if kind == "resolution":
                self.fold.classifications[seq] = self.resolve(seq, ref, entry)
            else:
                self.fold.classifications[seq] = self.abandon(seq, ref)
        self.fold.covered = {seq: self.is_covered(seq) for seq in self.fold._entries}
        return self.fold


def _valid(schema: Any, value: Any) -> bool:
    """JSON Schema 2020-12 check; a schema that is itself broken validates nothing."""
    # Imported here: only a resolution against a schema pays for jsonschema, not
    # every ``import rulvar_store`` (the CLI's start-up included).
    import jsonschema

    validator_cls = jsonschema.Draft202012Validator
    try:
        validator_cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError:
        return False
    return bool(validator_cls(schema).is_valid(value))


def fold_journal(entries: Iterable[Mapping[str, Any]]) -> ResolutionFold:
    """Fold a loaded journal (C5); entries are copied, never mutated.

    Raises:
        JournalOrderViolation: a ``resolution``/``abandon`` entry lacks ``ref``, its
            ``ref`` is not below its own seq or names no entry; or a seq repeats.
    """
    return _Walk([_plain(entry) for entry in entries]).run()


def classify(entries: Iterable[Mapping[str, Any]], seq: Seq) -> Classification:
    """Return how the ``resolution``/``abandon`` entry at ``seq`` landed (C5 3-4).

    Raises:
        JournalOrderViolation: as ``fold_journal``.
        KeyError: no ``resolution`` or ``abandon`` entry has that seq.
    """
    return fold_journal(entries).classifications[seq]


def fold_state(entries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Return the canonical C5 state ``{classifications, suspensions, abandoned}``.

    Raises:
        JournalOrderViolation: as ``fold_journal``.
    """
    return fold_journal(entries).state()


def fold_state_sha256(entries: Iterable[Mapping[str, Any]]) -> str:
    """Return the sha256 hex of the UTF-8 ``stable_stringify`` of ``fold_state``.

    Raises:
        JournalOrderViolation: as ``fold_journal``.
    """
    text = stable_stringify(fold_state(entries))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
