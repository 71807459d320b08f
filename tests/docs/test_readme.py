"""The short README: its two set-up commands, CI's test command, and its links.

The README is the front page (what it is, the backends, set-up, one example,
where the guides are); everything else lives in docs/. Its links must lead to
pages and headings that exist (the Sphinx build checks the site's own links;
the README is outside the site), and .ci/run must run exactly the test command
the README gives a new user.
"""

from __future__ import annotations

import re

from tests.docs._pages import ROOT, blocks

README = ROOT / "README.md"
LINK = re.compile(r"\]\((?P<target>[^)#\s]+)?(?:#(?P<anchor>[^)\s]+))?\)")
SET_UP = ["pip install -e '.[dev]' && rulvar check", "python -m pytest -n 3"]


def _slug(heading: str) -> str:
    """The anchor MyST (myst_heading_anchors) and GitHub give a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_the_readme_gives_the_two_set_up_commands_exactly() -> None:
    (set_up,) = [b for b in blocks("sh", README) if "pip install -e" in b.code]
    assert set_up.code.splitlines() == SET_UP


def test_ci_runs_exactly_the_readme_test_command() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert SET_UP[1] in script


def test_the_readme_stays_short() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 220


def test_every_readme_link_leads_to_a_file_and_heading_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    checked = 0
    for match in LINK.finditer(text):
        target, anchor = match["target"], match["anchor"]
        if target is not None and re.match(r"\w+://", target):
            continue
        path = ROOT / target if target else README
        assert path.exists(), f"README links to {target}, which does not exist"
        if anchor is not None:
            headings = re.findall(
                r"^#{1,6} (.+)$", path.read_text(encoding="utf-8"), re.M
            )
            assert anchor in {_slug(h) for h in headings}, (
                f"no heading #{anchor} in {target}"
            )
        checked += 1
    assert checked >= 10
