"""Import rules between the packages, read from the source (an AST scan, nothing imported).

1. No module outside ``rulvar_store/`` imports a private core module
   (``rulvar_store._anything``): backends, the kit, bench, soak and tests use the
   public modules ``rulvar_store``, ``rulvar_store.backend``, ``rulvar_store.ops``
   and ``rulvar_store.errors``. A test may white-box the core's own reference
   stores by naming the private module in a ``White-box: rulvar_store._x`` line of
   its module docstring.
2. No shipped package imports another shipped package's private module.
3. No upward import: the core never imports a driver, the kit or the CLI, and a
   backend never imports another backend, the kit or the CLI.

``RULES_EXEMPT`` below names every exception with the reason it exists.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

ROOT: Final = Path(__file__).resolve().parents[2]
CORE: Final = "rulvar_store"
SHIPPED: Final = (
    "rulvar_store",
    "rulvar_store_sqlite",
    "rulvar_store_postgres",
    "rulvar_conformance",
    "rulvar_cli",
    "rulvar_langgraph",
)
BACKENDS: Final = ("rulvar_store_sqlite", "rulvar_store_postgres")
KIT: Final = "rulvar_conformance"
CLI: Final = "rulvar_cli"
DRIVERS: Final = ("apsw", "psycopg", "psycopg_pool")
SKIPPED_DIRS: Final = frozenset({".git", ".venv", "build", "dist", "__pycache__"})

# (importing path prefix, imported module prefix): why it is allowed for now.
# Empty: the CLI lives in its own package above the kit, so no exception remains.
RULES_EXEMPT: Final[dict[tuple[str, str], str]] = {}


@dataclass(frozen=True)
class Imported:
    """One imported module name, where it was imported."""

    path: str
    line: int
    module: str


def _package_of(path: str) -> str:
    return path.split("/", 1)[0]


def _module_of(path: str) -> str:
    dotted = path.removesuffix(".py").replace("/", ".")
    return dotted.removesuffix(".__init__")


def imports_of(path: str, source: str) -> Iterator[Imported]:
    """Every module ``source`` imports, nested and TYPE_CHECKING imports included.

    ``from pkg import name`` yields ``pkg.name`` as well as ``pkg``, so importing a
    private submodule by name (``from rulvar_store import _intake``) is seen.
    """
    tree = ast.parse(source, filename=path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Imported(path, node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the importing module
                parent = _module_of(path).split(".")
                if not path.endswith("__init__.py"):
                    parent = parent[:-1]
                parent = parent[: len(parent) - (node.level - 1)]
                base = ".".join([*parent, base] if base else parent)
            yield Imported(path, node.lineno, base)
            for alias in node.names:
                yield Imported(path, node.lineno, f"{base}.{alias.name}")


def _private_part(module: str) -> bool:
    return any(part.startswith("_") for part in module.split(".")[1:])


def _white_boxed(source: str) -> set[str]:
    tree = ast.parse(source)
    doc = ast.get_docstring(tree) or ""
    named: set[str] = set()
    for line in doc.splitlines():
        if line.strip().startswith("White-box:"):
            named.update(word.strip("`,.") for word in line.split(":", 1)[1].split())
    return named


def _exempt(path: str, module: str) -> bool:
    return any(
        path.startswith(where) and (module == what or module.startswith(what + "."))
        for where, what in RULES_EXEMPT
    )


def violations(path: str, source: str) -> list[str]:
    """What breaks the three rules in one file, as ``path:line: reason`` lines."""
    found: dict[tuple[int, str], str] = {}  # one line per statement and rule
    own = _package_of(path)
    boxed = _white_boxed(source) if path.startswith("tests/") else set()
    for imp in imports_of(path, source):
        top = imp.module.split(".")[0]
        where = f"{imp.path}:{imp.line}"
        if _exempt(path, imp.module):
            continue
        kinds: list[str] = []
        if top == CORE and own != CORE and _private_part(imp.module):
            if not any(imp.module.startswith(b) for b in boxed):
                kinds.append("private core module")
        elif (
            top in SHIPPED
            and top != own
            and own in SHIPPED
            and _private_part(imp.module)
        ):
            kinds.append("private module of another package")
        if own == CORE and top in (*DRIVERS, KIT, CLI, *BACKENDS):
            kinds.append("upward import from the core")
        if own in BACKENDS and top in (KIT, CLI, *(b for b in BACKENDS if b != own)):
            kinds.append("upward import from a backend")
        if own == KIT and top == CLI:
            kinds.append("upward import from the kit")
        for kind in kinds:
            found.setdefault((imp.line, kind), f"{where}: {kind}: {imp.module}")
    return list(found.values())


def _python_files() -> Iterator[Path]:
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if SKIPPED_DIRS.intersection(parts) or any(
            p.endswith(".egg-info") for p in parts
        ):
            continue
        yield path


def test_no_private_core_import_cross_package_private_import_or_upward_import() -> None:
    found: list[str] = []
    for path in _python_files():
        relative = path.relative_to(ROOT).as_posix()
        found.extend(violations(relative, path.read_text(encoding="utf-8")))
    assert found == [], "\n".join(found)


def test_every_exemption_is_still_needed() -> None:
    """An exemption nobody uses any more is stale: delete it with the move."""
    used: set[tuple[str, str]] = set()
    for path in _python_files():
        relative = path.relative_to(ROOT).as_posix()
        for imp in imports_of(relative, path.read_text(encoding="utf-8")):
            for where, what in RULES_EXEMPT:
                if relative.startswith(where) and (
                    imp.module == what or imp.module.startswith(what + ".")
                ):
                    used.add((where, what))
    assert set(RULES_EXEMPT) == used


@pytest.mark.parametrize(
    ("path", "source", "reason"),
    [
        (
            "rulvar_conformance/x.py",
            "from rulvar_store._records import Lease\n",
            "private core",
        ),
        ("bench/b.py", "from rulvar_store import _intake\n", "private core"),
        ("tests/t.py", "import rulvar_store._memory\n", "private core"),
        (
            "rulvar_store_sqlite/x.py",
            "from rulvar_store_postgres._errors import translate\n",
            "another package",
        ),
        ("rulvar_store/_x.py", "import apsw\n", "upward import from the core"),
        (
            "rulvar_store/_x.py",
            "def f():\n    from rulvar_conformance.harness import certify\n",
            "upward import from the core",
        ),
        ("rulvar_store_sqlite/x.py", "import rulvar_conformance\n", "from a backend"),
        ("rulvar_conformance/x.py", "from rulvar_cli import main\n", "from the kit"),
    ],
)
def test_the_scan_catches_each_kind_of_violation(
    path: str, source: str, reason: str
) -> None:
    found = violations(path, source)
    assert any(reason in line for line in found), found


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("rulvar_conformance/x.py", "from rulvar_store.backend import hit\n"),
        ("rulvar_store/_x.py", "from rulvar_store._records import Lease\n"),
        ("rulvar_store_sqlite/x.py", "from rulvar_store_sqlite._sql import BEGIN\n"),
        ("rulvar_store_sqlite/_y.py", "from . import _sql\n"),
        (
            "tests/t.py",
            '"""Memory store internals.\n\nWhite-box: rulvar_store._memory\n"""\n'
            "from rulvar_store._memory import _LeaseRow\n",
        ),
    ],
)
def test_the_scan_allows_public_own_and_declared_white_box_imports(
    path: str, source: str
) -> None:
    assert violations(path, source) == []
