"""The error tree drawn in the docs and in ``rulvar_store.errors`` is the real one.

Both drawings (docs/reference/errors.md and the module docstring the API
reference renders) must list every public error once, under its first public
base class, so a new error or a moved one cannot leave the picture behind.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import rulvar_store.errors as errors_module
from rulvar_store.errors import RulvarError

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"^(?P<indent>[│ ├└─]*)(?P<name>[A-Z]\w+)")


def _drawn_parents(tree: str) -> dict[str, str | None]:
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in tree.splitlines():
        match = NAME.match(line.strip("\n"))
        if match is None:
            continue
        depth = len(match["indent"])
        while stack and stack[-1][0] >= depth:
            stack.pop()
        assert match["name"] not in parents, f"{match['name']} drawn twice"
        parents[match["name"]] = stack[-1][1] if stack else None
        stack.append((depth, match["name"]))
    return parents


def _real_parents() -> dict[str, str | None]:
    public = set(errors_module.__all__)
    found: dict[str, str | None] = {}
    for name in public:
        cls = getattr(errors_module, name)
        if cls is RulvarError:
            found[name] = None
            continue
        # The first public ancestor on the first-base line (private bases skipped).
        base = cls.__bases__[0]
        while base.__name__ not in public:
            base = base.__bases__[0]
        found[name] = base.__name__
    return found


def _docs_tree() -> str:
    text = (ROOT / "docs" / "reference" / "errors.md").read_text(encoding="utf-8")
    return re.search(r"```text\n(.*?)```", text, re.DOTALL)[1]  # type: ignore[index]


@pytest.mark.parametrize(
    "tree",
    [_docs_tree(), errors_module.__doc__ or ""],
    ids=["docs-page", "module-docstring"],
)
def test_the_drawn_error_tree_matches_the_classes(tree: str) -> None:
    lines = tree.splitlines()
    (top,) = [
        i for i, line in enumerate(lines) if line.strip().startswith("RulvarError")
    ]
    indent = len(lines[top]) - len(lines[top].lstrip())
    drawing = []
    for line in lines[top:]:
        if not line.strip():
            break
        drawing.append(line[indent:])
    drawn = _drawn_parents("\n".join(drawing))
    assert drawn == _real_parents()
