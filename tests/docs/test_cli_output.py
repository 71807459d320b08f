"""CLI output printed in the docs is what the commands print.

Three kinds of block, each named by the line before it:

- ``<!-- session: why -->`` before a block of ``$ command`` lines, each followed by
  its output: the page's last runnable Python example before the first session
  block runs first, in a scratch folder, then every session block of the page in
  order in that folder; each command's output must equal the lines shown. Under
  ``<!-- session (write lock held): why -->`` another process holds the SQLite
  file's write lock (``BEGIN IMMEDIATE``) while the block's commands run.
- ``<!-- output of: COMMAND -->`` before a ``text`` block: every shown line (``...``
  stands for lines left out) must be a line of COMMAND's output.
- ``<!-- labels of: COMMAND -->``: the row labels shown (the text before the first
  run of two spaces) must be labels of COMMAND's output; the figures vary.

Durations, lease expiry times and similar figures are normalised on both sides.
A marker ``(slow)`` (``<!-- output of (slow): ... -->``) names a command that runs
for minutes (the kill-point suite, a soak): those run only with
``RULVAR_DOCS_SLOW=1``, as .ci/run's docs step sets it, and skip with that reason
otherwise.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs._pages import BLOCK, ROOT, pages

SESSION = "<!-- session"
LOCK_HELD = "<!-- session (write lock held):"
OUTPUT_OF = re.compile(
    r"<!-- (?P<kind>output|labels) of(?P<slow> \(slow\))?: (?P<command>.+) -->$"
)
SLOW = os.environ.get("RULVAR_DOCS_SLOW") == "1"


def _normalise(line: str) -> str:
    line = re.sub(
        r"expires \S+ \(live, [\d.]+ s left\)", "expires T (live, N s left)", line
    )
    line = re.sub(r"\d+(\.\d+)? ms\b", "N ms", line)
    line = re.sub(r"memory domain \d+", "memory domain N", line)
    return re.sub(r"\s+", " ", line).strip()


def _run(command: str, folder: Path) -> subprocess.CompletedProcess[str]:
    words = shlex.split(command)
    if words[0] == "rulvar":
        words = [sys.executable, "-m", "rulvar_cli", *words[1:]]
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(
        words, cwd=folder, capture_output=True, text=True, timeout=900, check=False,
        env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _blocks(page: Path) -> list[re.Match[str]]:
    return list(BLOCK.finditer(page.read_text(encoding="utf-8")))


def _session_pages() -> list[Path]:
    return [
        p for p in pages() if any(m["before"].startswith(SESSION) for m in _blocks(p))
    ]


def _output_blocks() -> list[tuple[str, re.Match[str], re.Match[str]]]:
    found = []
    for page in pages():
        for block in _blocks(page):
            marker = OUTPUT_OF.match(block["before"])
            if marker is not None:
                found.append((str(page.relative_to(ROOT)), block, marker))
    return found


@pytest.mark.parametrize(
    "page", _session_pages(), ids=lambda p: str(p.relative_to(ROOT))
)
def test_session_output_is_what_the_commands_print(page: Path, tmp_path: Path) -> None:
    blocks = _blocks(page)
    first = next(i for i, m in enumerate(blocks) if m["before"].startswith(SESSION))
    setup = [
        m for m in blocks[:first]
        if m["lang"] == "python" and not m["before"].startswith("<!-- illustrative")
    ][-1]  # fmt: skip
    (tmp_path / "setup.py").write_text(setup["code"] + "\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "setup.py"], cwd=tmp_path, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    last_exit = 0
    for block in blocks[first:]:
        if not block["before"].startswith(SESSION):
            continue
        with _write_lock_held(
            tmp_path, block["code"], block["before"].startswith(LOCK_HELD)
        ):
            last_exit = _check_session(page, block["code"], tmp_path, last_exit)


@contextlib.contextmanager
def _write_lock_held(folder: Path, code: str, wanted: bool) -> Iterator[None]:
    """A real writer process inside BEGIN IMMEDIATE on the block's SQLite file."""
    if not wanted:
        yield
        return
    database = re.search(r"sqlite:///(\S+)", code)[1]  # type: ignore[index]
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITE_LOCK, database],
        cwd=folder, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        yield
    finally:
        holder.kill()
        holder.communicate()  # reaps it and closes its pipe


HOLD_WRITE_LOCK = """
import sys, time
import apsw
connection = apsw.Connection(sys.argv[1])
connection.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(120)
"""


def _check_session(page: Path, code: str, folder: Path, last_exit: int) -> int:
    """Run one block's commands; each one's output must be the lines shown.

    Returns the last command's exit code, for an ``echo $?`` in the next block.
    """
    commands: list[tuple[str, list[str]]] = []
    for line in code.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            commands[-1][1].append(line)
    for command, shown in commands:
        expected = [_normalise(line) for line in shown]
        if command == "echo $?":
            actual = [str(last_exit)]
        else:
            ran = _run(command, folder)
            last_exit = ran.returncode
            actual = [_normalise(x) for x in (ran.stdout + ran.stderr).splitlines()]
        assert actual == expected, f"{page.name}: $ {command}"
    return last_exit


@pytest.mark.parametrize(
    ("page", "block", "marker"),
    _output_blocks(),
    ids=lambda x: str(x)[:60] if isinstance(x, str) else "",
)
def test_shown_output_lines_are_the_commands(
    page: str, block: re.Match[str], marker: re.Match[str], tmp_path: Path
) -> None:
    if marker["slow"] and not SLOW:
        pytest.skip(
            f"{marker['command']!r} takes from 20 s to minutes: it runs with RULVAR_DOCS_SLOW=1, in .ci/run's docs step"
        )
    ran = _run(marker["command"], tmp_path)
    printed = (ran.stdout + ran.stderr).splitlines()
    shown = [line for line in block["code"].splitlines() if line.strip() != "..."]
    if marker["kind"] == "labels":
        labels = {re.split(r"\s{2,}", line.strip())[0] for line in printed}
        missing = [
            line for line in shown
            if line.startswith("  ") and re.split(r"\s{2,}", line.strip())[0] not in labels
        ]  # fmt: skip
    else:
        normalised = {_normalise(line) for line in printed}
        missing = [line for line in shown if _normalise(line) not in normalised]
    assert missing == [], f"{page}: {marker['command']} printed:\n" + "\n".join(
        printed[-60:]
    )
