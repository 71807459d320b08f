"""pytest plugin: certify a store backend as ordinary test items, only when asked.

Registered through the ``pytest11`` entry point; without one of the two triggers
below it adds nothing but two options, the ``clause`` marker and fixtures nobody
requests.

By URL::

    pytest --rulvar-store=sqlite:///tmp/check.db

resolves the backend through the ``rulvar.stores`` registry, opens
``Backend.certify(url)`` once per session (fresh isolated stores next to the
URL's location) and adds the suites the backend's declared capabilities call
for, under ``rulvar-conformance``.

By fixture: define ``rulvar_store_factory`` in a ``conftest.py``, returning a
``FreshStoreFactory`` (``Callable[[int | None], OpenedStore]``, a fresh isolated
store for a ttl), and run ``pytest --rulvar-certify``. Every conftest that
defines it gets the kit items under ``<its directory>/rulvar-conformance``, so
its fixtures (and its directory's others) apply. Capabilities are read from the
store's declared markers; override ``rulvar_store_capabilities`` in the same
conftest to state them instead.

Items are named by suite and check id, e.g.
``rulvar-conformance::test_fenced_writes[fenced-run-match]``; each carries
``@pytest.mark.clause(<id>)`` for its clauses and matches ``-k <clause id>``.
Suites the store does not declare are skipped with the missing capability.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Final

import pytest

from rulvar_conformance.certify import CERTIFY_EXPIRY_TTL_MS, Certification
from rulvar_store import ConfigError, FreshStoreFactory
from rulvar_store._plugins import Backend, resolve_backend
from rulvar_store._urls import StoreUrl, parse_store_url

__all__ = [
    "pytest_addoption",
    "pytest_collect_file",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_itemcollected",
    "rulvar_store_capabilities",
]

COLLECTOR_NAME: Final = "rulvar-conformance"
FACTORY_FIXTURE: Final = "rulvar_store_factory"
CLAUSE_MARKER: Final = "clause(id): SPI contract clause checked (select with -k ID)"

_URL_TARGET: Final = pytest.StashKey[tuple[StoreUrl, Backend]]()
_MODE: Final = pytest.StashKey[str]()
_CERTIFY_DIRS: Final = pytest.StashKey[list[str]]()
_PROBED: Final = pytest.StashKey[dict[int, tuple[object, frozenset[str]]]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rulvar", "rulvar store conformance kit")
    group.addoption(
        "--rulvar-store",
        metavar="URL",
        default=None,
        help="certify the store backend of URL (e.g. memory://, sqlite:///x.db): "
        "adds the conformance suites its capabilities call for",
    )
    group.addoption(
        "--rulvar-certify",
        action="store_true",
        default=False,
        help=f"add the conformance suites under every conftest.py that defines "
        f"a {FACTORY_FIXTURE!r} fixture",
    )


def pytest_configure(config: pytest.Config) -> None:
    # The kit's items and ``pytest_params`` mark clauses; strict-marker runs need it.
    config.addinivalue_line("markers", CLAUSE_MARKER)
    config.stash[_CERTIFY_DIRS] = []
    config.stash[_PROBED] = {}
    url = config.getoption("rulvar_store")
    if url is None:
        return
    try:
        parsed = parse_store_url(url)
        backend = resolve_backend(parsed)
    except ConfigError as exc:
        raise pytest.UsageError(f"--rulvar-store: {exc}") from exc
    if backend.certify is None:
        raise pytest.UsageError(
            f"--rulvar-store: backend {backend.name!r} offers no certify() factory"
        )
    config.stash[_URL_TARGET] = (parsed, backend)


def _checks_module() -> ModuleType:
    from rulvar_conformance import _pytest_checks

    return _pytest_checks


def _collector(parent: pytest.Collector, nodeid: str, mode: str) -> pytest.Module:
    path = Path(str(_checks_module().__file__))
    module = pytest.Module.from_parent(
        parent, path=path, name=COLLECTOR_NAME, nodeid=nodeid
    )
    module.stash[_MODE] = mode
    return module


def _defines_factory(config: pytest.Config, conftest: Path) -> bool:
    """Whether the already-loaded conftest module at ``conftest`` has the fixture."""
    wanted = conftest.resolve()
    for plugin in config.pluginmanager.get_plugins():
        source = getattr(plugin, "__file__", None)
        if isinstance(source, str) and Path(source).resolve() == wanted:
            return hasattr(plugin, FACTORY_FIXTURE)
    return False


def pytest_collect_file(
    file_path: Path, parent: pytest.Collector
) -> pytest.Module | None:
    """Hang the kit items under each conftest.py that defines the factory fixture."""
    config = parent.config
    if not config.getoption("rulvar_certify") or file_path.name != "conftest.py":
        return None
    if not _defines_factory(config, file_path):
        return None
    base = parent.nodeid if parent.nodeid not in ("", ".") else ""
    nodeid = f"{base}/{COLLECTOR_NAME}" if base else COLLECTOR_NAME
    config.stash[_CERTIFY_DIRS].append(str(file_path.parent))
    return _collector(parent, nodeid, "fixture")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Append the URL-mode items; ``tryfirst`` so -k, -m and deselection see them."""
    if config.getoption("rulvar_certify") and not config.stash[_CERTIFY_DIRS]:
        raise pytest.UsageError(
            f"--rulvar-certify: no collected conftest.py defines a {FACTORY_FIXTURE!r} fixture"
        )
    if _URL_TARGET in config.stash:
        url = config.stash[_URL_TARGET][0]
        nodeid = f"{COLLECTOR_NAME}[{url.scheme}]"
        items.extend(session.genitems(_collector(session, nodeid, "url")))


def pytest_itemcollected(item: pytest.Item) -> None:
    """Let ``-k J2`` select the kit items that check clause J2."""
    module = item.parent
    if isinstance(module, pytest.Module) and _MODE in module.stash:
        for marker in item.iter_markers("clause"):
            item.extra_keyword_matches.update(str(arg) for arg in marker.args)


@pytest.fixture(scope="session")
def _rulvar_url_factory(request: pytest.FixtureRequest) -> Iterator[FreshStoreFactory]:
    url, backend = request.config.stash[_URL_TARGET]
    if backend.certify is None:  # refused in pytest_configure; narrows the type
        raise pytest.UsageError(f"backend {backend.name!r} offers no certify()")
    with backend.certify(url) as fresh:
        yield fresh


@pytest.fixture
def rulvar_store_capabilities(request: pytest.FixtureRequest) -> frozenset[str]:
    """Capabilities of the conftest factory's stores, read from their markers.

    Override in the conftest that defines ``rulvar_store_factory`` to declare them.
    """
    from rulvar_conformance.certify import probe_capabilities

    fresh: FreshStoreFactory = request.getfixturevalue(FACTORY_FIXTURE)
    cache = request.config.stash[_PROBED]
    hit = cache.get(id(fresh))
    if hit is None or hit[0] is not fresh:
        hit = (fresh, probe_capabilities(fresh))
        cache[id(fresh)] = hit
    return hit[1]


@pytest.fixture
def rulvar_certification(request: pytest.FixtureRequest) -> Certification:
    """The factory, capabilities and expiry ttl a kit item certifies with."""
    module = request.node.getparent(pytest.Module)
    if module is not None and module.stash.get(_MODE, None) == "url":
        _, backend = request.config.stash[_URL_TARGET]
        fresh: FreshStoreFactory = request.getfixturevalue("_rulvar_url_factory")
        return Certification(fresh, backend.capabilities, backend.certify_expiry_ttl_ms)
    fresh = request.getfixturevalue(FACTORY_FIXTURE)
    capabilities: frozenset[str] = request.getfixturevalue("rulvar_store_capabilities")
    return Certification(fresh, frozenset(capabilities), CERTIFY_EXPIRY_TTL_MS)
