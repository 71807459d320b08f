"""The pages whose code blocks are tested: README.md and every docs/**/*.md page.

Shared by the tests of tests/docs: a block's page, its language, the line before
it (where ``<!-- illustrative: why -->`` and the other markers go) and its text.
Pages added later (another guide in docs/guides/) are picked up by the glob.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ILLUSTRATIVE = "<!-- illustrative"
BLOCK = re.compile(
    r"(?P<before>[^\n]*)\n```(?P<lang>[\w{}-]*)[^\n]*\n(?P<code>.*?)\n```", re.DOTALL
)


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository root
    index: int  # the block's place among the page's blocks of its language
    lang: str
    before: str
    code: str

    @property
    def illustrative(self) -> bool:
        return self.before.startswith(ILLUSTRATIVE)

    @property
    def id(self) -> str:
        return f"{self.page}#{self.lang}{self.index}"


def pages() -> list[Path]:
    docs = sorted(
        path
        for path in (ROOT / "docs").rglob("*.md")
        if "_build" not in path.relative_to(ROOT / "docs").parts
    )
    return [ROOT / "README.md", *docs]


def blocks(lang: str, page: Path | None = None) -> list[Block]:
    found = []
    for path in [page] if page is not None else pages():
        text = path.read_text(encoding="utf-8")
        counted = 0
        for match in BLOCK.finditer(text):
            if match["lang"] != lang:
                continue
            found.append(
                Block(
                    page=str(path.relative_to(ROOT)),
                    index=counted,
                    lang=lang,
                    before=match["before"],
                    code=match["code"],
                )
            )
            counted += 1
    return found
