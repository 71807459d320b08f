"""Install the built wheel as users do and run the ``rulvar`` commands on each install.

Three fresh venvs from one wheel built from the tracked files: core only,
``[sqlite]`` and ``[postgres]``, each installing its dependencies from the
package index. In each, ``rulvar stores``, ``rulvar check``, ``rulvar soak
--profile quick`` and ``rulvar runs list`` either succeed or refuse in one line
naming what to install (exit 2); a traceback, or a store failure for a missing
module, fails the smoke.

Usage: ``python3 ci/smoke_installs.py`` (PostgreSQL commands use
``RULVAR_TEST_POSTGRES_URL``; without it they are left out and said so).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A soak or a check that outlives this has hung; the quick profile caps at 90 s.
COMMAND_TIMEOUT_S = 600


@dataclass(frozen=True)
class Expect:
    """One command and what a user must see: an exit code, and for 2 a hint."""

    args: tuple[str, ...]
    exit_code: int
    says: str = ""


def _run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # type: ignore[call-overload, no-any-return]  # kwargs pass through
        command, capture_output=True, text=True, check=False, **kwargs
    )


def build_wheel(work: Path) -> Path:
    """The wheel of the tracked files only: a stale ``build/`` never leaks in."""
    source = work / "src"
    source.mkdir()
    listed = _run(["git", "-C", str(ROOT), "ls-files", "-z"])
    if listed.returncode != 0:
        sys.exit(f"smoke: git ls-files failed: {listed.stderr}")
    for name in filter(None, listed.stdout.split("\0")):
        origin = ROOT / name
        if origin.is_file():
            target = source / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(origin.read_bytes())
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w",
         str(work / "dist"), str(source)]
    )  # fmt: skip
    if built.returncode != 0:
        sys.exit(f"smoke: building the wheel failed:\n{built.stdout}{built.stderr}")
    (wheel,) = (work / "dist").glob("rulvar_stores-*.whl")
    return wheel


def make_venv(work: Path, wheel: Path, extra: str | None) -> Path:
    """A fresh venv with the wheel (and its extra) installed from the index."""
    venv = work / f"venv-{extra or 'core'}"
    created = _run([sys.executable, "-m", "venv", str(venv)])
    if created.returncode != 0:
        sys.exit(f"smoke: venv failed: {created.stderr}")
    spec = str(wheel) if extra is None else f"{wheel}[{extra}]"
    installed = _run([str(venv / "bin" / "pip"), "install", "--quiet", spec])
    if installed.returncode != 0:
        sys.exit(f"smoke: pip install {spec} failed:\n{installed.stderr}")
    return venv


def seed_script(url: str) -> str:
    """Python that writes one run through the public API, as a user's worker would;
    its counters say so, and without the otel extra nothing imported OpenTelemetry."""
    return (
        "import sys\n"
        "from rulvar_store import open_store\n"
        f"with open_store({url!r}) as opened:\n"
        "    opened.journal.put_meta({'runId': 'smoke-run', 'status': 'running'})\n"
        "    assert opened.journal.stats()['calls'] == 1, opened.journal.stats()\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'opentelemetry']\n"
    )


def postgres_schema_url(postgres: str) -> str:
    """A schema of the smoke's own, so listing it finds exactly the seeded run."""
    joiner = "&" if "?" in postgres else "?"
    return f"{postgres}{joiner}schema=rulvar_smoke_{os.getpid()}"


def drop_schema_script(postgres: str) -> str:
    return (
        "import psycopg\n"
        f"with psycopg.connect({postgres!r}, autocommit=True) as conn:\n"
        f"    conn.execute('DROP SCHEMA IF EXISTS rulvar_smoke_{os.getpid()} CASCADE')\n"
    )


def expectations(
    extra: str | None, scratch: Path, postgres: str | None
) -> list[Expect]:
    sqlite_url = f"sqlite:///{scratch / 'runs.db'}"
    missing_sqlite = Expect(("runs", "list", sqlite_url), 2, "apsw")
    common = [Expect(("stores",), 0), Expect(("check",), 0)]
    if extra == "sqlite":
        return [
            *common,
            Expect(("soak", "--profile", "quick"), 0),
            Expect(("runs", "list", sqlite_url), 0, "1 run"),
            Expect(
                ("runs", "list", postgres or "postgresql://127.0.0.1/x"), 2, "psycopg"
            ),
        ]
    refused_soak = Expect(
        ("soak", "--profile", "quick"), 2, "install the 'sqlite' extra"
    )
    if extra == "postgres":
        rows = [*common, refused_soak, missing_sqlite]
        if postgres is not None:
            rows += [
                Expect(("check", postgres, "--suite", "journal"), 0),
                Expect(("soak", "--profile", "quick", postgres), 0),
                Expect(("runs", "list", postgres_schema_url(postgres)), 0, "1 run"),
            ]
        return rows
    file_url = f"file://{scratch / 'file-runs'}"
    return [
        *common,
        refused_soak,
        Expect(("runs", "list", file_url), 0, "1 run"),
        missing_sqlite,
        Expect(("runs", "list", postgres or "postgresql://127.0.0.1/x"), 2, "psycopg"),
    ]


def check_one(venv: Path, expect: Expect) -> list[str]:
    """The problems a user would see running this command; empty when fine."""
    done = _run([str(venv / "bin" / "rulvar"), *expect.args], timeout=COMMAND_TIMEOUT_S)
    shown = f"rulvar {' '.join(expect.args)} ({venv.name})"
    problems = []
    if done.returncode != expect.exit_code:
        problems.append(f"{shown}: exit {done.returncode}, expected {expect.exit_code}")
    if "Traceback" in done.stderr + done.stdout:
        problems.append(f"{shown}: printed a traceback")
    if "ModuleNotFoundError" in done.stdout:
        problems.append(f"{shown}: a missing module reported as a store failure")
    if expect.exit_code == 2 and len(done.stderr.strip().splitlines()) != 1:
        problems.append(f"{shown}: a refusal must be one line on stderr")
    if expect.says and expect.says not in done.stdout + done.stderr:
        problems.append(f"{shown}: does not say {expect.says!r}")
    if problems:
        problems.append(
            f"  stdout: {done.stdout[-2000:]}\n  stderr: {done.stderr[-2000:]}"
        )
    print(f"{'ok  ' if not problems else 'FAIL'} {shown} -> exit {done.returncode}")
    return problems


# Each store class a user may import directly, and the extra that brings its driver.
DIRECT_IMPORTS = (
    ("rulvar_store_sqlite", "SqliteStore", "sqlite"),
    ("rulvar_store_postgres", "PostgresStore", "postgres"),
    ("rulvar_langgraph", "RulvarSaver", "langgraph"),
)


def check_direct_imports(venv: Path, extra: str | None) -> list[str]:
    """Importing a store class without its extra names the extra (MissingExtraError)."""
    problems = []
    for module, name, needs in DIRECT_IMPORTS:
        if needs == extra:
            continue
        script = (
            "import importlib\n"
            "from rulvar_store import MissingExtraError\n"
            "try:\n"
            f"    getattr(importlib.import_module({module!r}), {name!r})\n"
            "except MissingExtraError as exc:\n"
            f"    assert 'rulvar-stores[{needs}]' in str(exc), str(exc)\n"
            "else:\n"
            "    raise SystemExit('imported without its extra')\n"
        )
        done = _run([str(venv / "bin" / "python"), "-c", script])
        shown = f"from {module} import {name} ({venv.name})"
        print(f"{'ok  ' if done.returncode == 0 else 'FAIL'} {shown}")
        if done.returncode != 0:
            problems.append(f"{shown}: {done.stdout[-1000:]}{done.stderr[-1000:]}")
    return problems


def main() -> int:
    postgres = os.environ.get("RULVAR_TEST_POSTGRES_URL")
    if postgres is None:
        print("smoke: RULVAR_TEST_POSTGRES_URL not set: PostgreSQL commands left out")
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="rulvar-smoke-") as name:
        work = Path(name)
        wheel = build_wheel(work)
        print(f"smoke: built {wheel.name}")
        for extra in (None, "sqlite", "postgres"):
            venv = make_venv(work, wheel, extra)
            scratch = work / f"scratch-{extra or 'core'}"
            scratch.mkdir()
            seed_url = {
                None: f"file://{scratch / 'file-runs'}",
                "sqlite": f"sqlite:///{scratch / 'runs.db'}",
                "postgres": postgres and postgres_schema_url(postgres),
            }.get(extra)
            if seed_url is not None:
                seeded = _run(
                    [str(venv / "bin" / "python"), "-c", seed_script(seed_url)]
                )
                if seeded.returncode != 0:
                    problems.append(f"seeding {seed_url} failed: {seeded.stderr}")
            problems += check_direct_imports(venv, extra)
            try:
                for expect in expectations(extra, scratch, postgres):
                    problems += check_one(venv, expect)
            finally:
                if extra == "postgres" and postgres is not None:
                    _run(
                        [
                            str(venv / "bin" / "python"),
                            "-c",
                            drop_schema_script(postgres),
                        ]
                    )
    for problem in problems:
        print(problem, file=sys.stderr)
    failed = sum(1 for p in problems if not p.startswith("  "))
    print(f"smoke: {'FAILED' if problems else 'passed'}: {failed} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
