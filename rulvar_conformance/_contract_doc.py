"""Render the clause catalogue (``clauses.CLAUSES``) as ``docs/CONTRACT.md``.

The document is what a user reads to look up a clause that ``rulvar check`` or a
test cites. It is generated, never edited by hand; ``tests/docs`` fails when the
file and the catalogue differ. Regenerate with::

    python -m rulvar_conformance._contract_doc
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

from rulvar_conformance.clauses import CLAUSES, clause_family

__all__ = ["CONTRACT_DOC", "render_contract_reference", "write_contract_reference"]

CONTRACT_DOC: Final = Path("docs") / "CONTRACT.md"

# Family letter -> (section, title). The sections follow the contract's chapters.
_FAMILIES: Final[dict[str, tuple[int, str]]] = {
    "D": (1, "Data model"),
    "J": (2, "Journal store"),
    "M": (2, "Run metadata"),
    "L": (3, "Leases and fencing epochs"),
    "F": (4, "Fenced writes"),
    "T": (5, "Transcript (blob) stores"),
    "Q": (6, "SQLite store"),
    "P": (7, "PostgreSQL store"),
    "C": (8, "Conformance kit"),
    "K": (9, "Kill points"),
    "S": (10, "Multi-process soak"),
    "A": (11, "Audit and reconcile"),
    "R": (12, "Retention"),
    "X": (13, "Pitfalls the kit checks"),
    "Y": (14, "asyncio API"),
    "G": (15, "LangGraph checkpointers"),
    "W": (16, "Power loss"),
    "E": (17, "Disk faults"),
    "H": (18, "High availability (replicated PostgreSQL failover)"),
    "V": (19, "Moving runs between stores"),
}

_INTRO: Final = """\
# Contract clauses

Every behaviour the stores promise has a clause id: a letter for its family and a
number (`J6`, `L5`, `F2`, ...). `rulvar check` and the conformance kit cite these
ids for each check, tests carry them as `@pytest.mark.clause("J6")`, and
`pytest -k J6` selects every test of one clause. This page lists each clause with
its one-sentence statement, grouped by family.

This file is generated from `rulvar_conformance/clauses.py` by
`python -m rulvar_conformance._contract_doc`; do not edit it by hand (a test keeps
the two identical).
"""


def _escape(text: str) -> str:
    """Keep a sentence inside one Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def render_contract_reference() -> str:
    """Return the Markdown text of ``docs/CONTRACT.md`` for the current catalogue."""
    groups: dict[str, list[str]] = {}
    for clause_id in CLAUSES:
        groups.setdefault(clause_family(clause_id), []).append(clause_id)
    known = [family for family in _FAMILIES if family in groups]
    unknown = sorted(family for family in groups if family not in _FAMILIES)
    lines = [_INTRO]
    for family in [*known, *unknown]:
        section, title = _FAMILIES.get(family, (0, "Other clauses"))
        heading = f"{section}. {title}" if section else title
        lines.append(f"## {heading} (`{family}`)\n")
        lines.append("| Clause | Statement |")
        lines.append("|---|---|")
        for clause_id in groups[family]:
            lines.append(f"| {clause_id} | {_escape(CLAUSES[clause_id])} |")
        lines.append("")
    return "\n".join(lines)


def write_contract_reference(root: Path) -> Path:
    """Write the rendered catalogue under ``root`` and return the file's path."""
    target = root / CONTRACT_DOC
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_contract_reference(), encoding="utf-8")
    return target


if __name__ == "__main__":  # pragma: no cover - the regeneration entry point
    where = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()
    print(write_contract_reference(where))
