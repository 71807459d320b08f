"""docs/CONTRACT.md is the clause catalogue of the kit, rendered, byte for byte."""

from __future__ import annotations

from pathlib import Path

from rulvar_conformance._contract_doc import CONTRACT_DOC, render_contract_reference
from rulvar_conformance.clauses import CLAUSES

ROOT = Path(__file__).resolve().parents[2]


def test_contract_doc_matches_the_clause_catalogue() -> None:
    """A clause added or reworded in clauses.py must be regenerated into the docs.

    Fix a failure with ``python -m rulvar_conformance._contract_doc``.
    """
    assert (ROOT / CONTRACT_DOC).read_text(encoding="utf-8") == (
        render_contract_reference()
    )


def test_every_clause_is_listed_once_in_the_contract_doc() -> None:
    rows = [
        line.split("|")[1].strip()
        for line in render_contract_reference().splitlines()
        if line.startswith("| ") and not line.startswith("| Clause")
    ]
    assert rows == list(CLAUSES)


def test_readme_points_to_the_rendered_contract() -> None:
    """The README's clause citations lead to a document that exists in the repository."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/CONTRACT.md" in readme
