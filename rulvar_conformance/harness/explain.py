"""What a failed check says, in words: its title, each clause's text, what was observed.

``rulvar check`` prints these lines under a failing row and the pytest plugin
uses them as the failure's report, so both tell a store author the same thing.
"""

from __future__ import annotations

from collections.abc import Sequence

from rulvar_conformance.clauses import CLAUSES

__all__ = ["clause_texts", "explain_failure", "failure_detail"]


def clause_texts(clauses: Sequence[str]) -> list[dict[str, str]]:
    """Each clause with its one-line text from the catalogue."""
    return [{"id": clause, "text": CLAUSES.get(clause, "")} for clause in clauses]


def failure_detail(check_id: str, error: str) -> str:
    """A failure's text without the ``store-conformance <id>:`` prefix."""
    return error.removeprefix(f"store-conformance {check_id}: ")


def explain_failure(
    title: str, clauses: Sequence[str], detail: str, indent: str = ""
) -> list[str]:
    """The lines that explain a failure: title, ``ID: text`` per clause, ``failed:``."""
    lines = [f"{indent}{title}"] if title else []
    lines += [f"{indent}{c['id']}: {c['text']}" for c in clause_texts(clauses)]
    lines.append(f"{indent}failed: {detail}")
    return lines
