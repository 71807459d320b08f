"""Sphinx configuration of the rulvar stores documentation.

Why Sphinx with MyST Markdown: the pages stay plain Markdown (readable on any
forge, and their code blocks run as tests, tests/docs/test_examples.py), while
Sphinx gives what MkDocs needs plugins for: an API reference from the
docstrings (autodoc, with napoleon for their Google style), the CLI reference
from the click commands themselves (sphinx-click, so it cannot drift from
``--help``), and a nitpicky build (``-W --keep-going -n``) whose cross-reference
and anchor checks run offline. Build: ``python -m sphinx -W --keep-going -n -b
html docs docs/_build/html`` (``pip install -e '.[docs]'``).
"""

from __future__ import annotations

project = "rulvar stores"
author = "rulvar"
copyright = "rulvar, MIT license"  # Sphinx's own name for it

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx_click",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
# README.md is this folder's note to maintainers, not a page; _build is output.
exclude_patterns = ["_build", "README.md"]

# Every heading down to ### gets an anchor, so `page.md#a-heading` links resolve
# and a broken anchor is a build warning (an error under -W).
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

# The API reference: Google-style docstrings, signatures without annotations
# (types are in the docstrings; annotations of private helpers and third-party
# types would each need a target under -n), members in source order.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
autodoc_typehints = "none"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}

html_theme = "alabaster"
html_title = "rulvar stores"

# The nitpicky build resolves every reference. These have no page here: the
# standard library's and LangGraph's types (no intersphinx: the build runs
# offline), a type alias (documented as data, referenced as a class by the
# annotations), and private classes named as bases ("Bases: ...").
nitpick_ignore = [
    ("py:class", "AbstractContextManager"),
    ("py:class", "collections.abc.Callable"),
    ("py:class", "collections.abc.Mapping"),
    ("py:class", "RunnableConfig"),
    ("py:class", "LocationFactory"),
]
nitpick_ignore_regex = [("py:class", r"rulvar_\w+(\.\w+)*\._\w+(\.\w+)*")]


def _check_suites(app: object, docname: str, source: list[str]) -> None:
    """Fill the CLI page's suite table from the kit, as ``rulvar check --help`` does.

    That help lists the suites in a custom epilog that sphinx-click does not
    render; generating the table here keeps the page equal to the help.
    """
    if docname != "reference/cli":
        return
    from rulvar_conformance.harness.certify import suite_specs

    rows = [
        f"| `{spec.name}` | {spec.description.replace('|', '/')} | "
        f"{'yes' if spec.default else 'no'} | {spec.capability or '-'} |"
        for spec in suite_specs()
    ]
    table = "\n".join(
        ["| suite | checks | default | needs |", "|---|---|---|---|", *rows]
    )
    source[0] = source[0].replace("<!-- check-suites -->", table)


def setup(app: object) -> dict[str, bool]:
    app.connect("source-read", _check_suites)  # type: ignore[attr-defined]
    return {"parallel_read_safe": True}
