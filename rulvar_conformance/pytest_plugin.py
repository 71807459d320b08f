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

By fixture: define ``rulvar_store_locations`` in a ``conftest.py``, returning a
``LocationFactory`` (``Callable[[], StoreLocation]``: a fresh isolated location
per call, which checks open as often as they need, in this process or in a
spawned child), and run ``pytest --rulvar-certify``. A plain
``rulvar_store_factory`` fixture (``Callable[[int | None], OpenedStore]``, one
fresh store per call) also works; the checks that need a second handle, a clock
or a child process are then skipped as not run. Every conftest that defines one
of them gets the kit items under ``<its directory>/rulvar-conformance``, so its
fixtures (and its directory's others) apply. Capabilities are read from the
store's declared markers; override ``rulvar_store_capabilities`` in the same
conftest to state them instead.

Default suites run unless ``--rulvar-suite NAME`` (repeatable, ``all`` for
every suite) selects others, e.g. ``--rulvar-suite kill-points``.

Items are named by suite and check id, e.g.
``rulvar-conformance::test_fenced_writes[fenced-run-match]``; each carries
``@pytest.mark.clause(<id>)`` for its clauses and matches ``-k <clause id>``.
Suites the store does not declare are skipped with the missing capability.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from types import ModuleType
from typing import Final

import pytest

from rulvar_conformance.harness.certification import by_url
from rulvar_conformance.harness.certify import (
    ALL_SUITES,
    CERTIFY_EXPIRY_TTL_MS,
    Certification,
    suite_specs,
)
from rulvar_store import ConfigError, RulvarError
from rulvar_store.backend import (
    Backend,
    FreshStoreFactory,
    LocationFactory,
    StoreUrl,
    locations_from_factory,
    parse_store_url,
    resolve_backend,
)

__all__ = [
    "pytest_addoption",
    "pytest_collect_file",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_itemcollected",
    "rulvar_store_capabilities",
]

COLLECTOR_NAME: Final = "rulvar-conformance"
LOCATIONS_FIXTURE: Final = "rulvar_store_locations"
FACTORY_FIXTURE: Final = "rulvar_store_factory"
CLAUSE_MARKER: Final = "clause(id): SPI contract clause checked (select with -k ID)"
SUITE_MARKER: Final = "rulvar_suite(name): the conformance suite a kit item belongs to"

_URL_TARGET: Final = pytest.StashKey[tuple[StoreUrl, Backend]]()
_MODE: Final = pytest.StashKey[str]()
_CERTIFY_DIRS: Final = pytest.StashKey[list[str]]()
_PROBED: Final = pytest.StashKey[dict[int, tuple[object, frozenset[str]]]]()
_SUITES: Final = pytest.StashKey[set[str] | None]()
_ADAPTED: Final = pytest.StashKey[dict[int, tuple[object, LocationFactory]]]()


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
        f"a {LOCATIONS_FIXTURE!r} or {FACTORY_FIXTURE!r} fixture",
    )
    group.addoption(
        "--rulvar-suite",
        metavar="NAME",
        action="append",
        default=None,
        help="run this conformance suite (repeatable; 'all' for every suite); "
        "default: the default suites",
    )


def pytest_configure(config: pytest.Config) -> None:
    # The kit's items and ``pytest_params`` mark clauses; strict-marker runs need it.
    config.addinivalue_line("markers", CLAUSE_MARKER)
    config.addinivalue_line("markers", SUITE_MARKER)
    config.stash[_CERTIFY_DIRS] = []
    config.stash[_PROBED] = {}
    config.stash[_ADAPTED] = {}
    config.stash[_SUITES] = _suite_selection(config.getoption("rulvar_suite"))
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


def _suite_selection(names: list[str] | None) -> set[str] | None:
    """The suite names to keep; ``None`` keeps every suite (``all``)."""
    specs = suite_specs()
    if names is None:
        return {spec.name for spec in specs if spec.default}
    if ALL_SUITES in names:
        return None
    known = {spec.name for spec in specs}
    unknown = sorted(set(names) - known)
    if unknown:
        raise pytest.UsageError(
            f"--rulvar-suite: no suite named {', '.join(unknown)}; "
            f"known: {', '.join(sorted(known))}, {ALL_SUITES}"
        )
    return set(names)


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
            return hasattr(plugin, LOCATIONS_FIXTURE) or hasattr(
                plugin, FACTORY_FIXTURE
            )
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
            f"--rulvar-certify: no collected conftest.py defines a "
            f"{LOCATIONS_FIXTURE!r} or {FACTORY_FIXTURE!r} fixture"
        )
    if _URL_TARGET in config.stash:
        url = config.stash[_URL_TARGET][0]
        nodeid = f"{COLLECTOR_NAME}[{url.scheme}]"
        items.extend(session.genitems(_collector(session, nodeid, "url")))
    _drop_unselected_suites(config, items)


def _drop_unselected_suites(config: pytest.Config, items: list[pytest.Item]) -> None:
    selected = config.stash[_SUITES]
    if selected is None:
        return
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        marker = item.get_closest_marker("rulvar_suite")
        is_kit_item = marker is not None and _MODE in _module_stash(item)
        if is_kit_item and marker is not None and marker.args[0] not in selected:
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _module_stash(item: pytest.Item) -> pytest.Stash:
    module = item.getparent(pytest.Module)
    return module.stash if module is not None else pytest.Stash()


def pytest_itemcollected(item: pytest.Item) -> None:
    """Let ``-k J2`` select the kit items that check clause J2."""
    module = item.parent
    if isinstance(module, pytest.Module) and _MODE in module.stash:
        for marker in item.iter_markers("clause"):
            item.extra_keyword_matches.update(str(arg) for arg in marker.args)


@pytest.fixture(scope="session")
def _rulvar_url_locations(request: pytest.FixtureRequest) -> Iterator[LocationFactory]:
    url, backend = request.config.stash[_URL_TARGET]
    if backend.certify is None:  # refused in pytest_configure; narrows the type
        raise pytest.UsageError(f"backend {backend.name!r} offers no certify()")
    with ExitStack() as stack:
        try:
            locations = stack.enter_context(backend.certify(url))
        except RulvarError:
            raise  # a typed setup problem (an unreachable server): the store's
        except Exception as exc:
            # A bug in the plugin's own certify(), not a failed check: stop the
            # session with exit 2, as ``rulvar check`` does.
            pytest.exit(
                f"--rulvar-store: backend {backend.name!r} failed in its own "
                f"certify(), before any check ran: {type(exc).__name__}: {exc} "
                "(a bug in the plugin, not in the store under test)",
                returncode=2,
            )
        yield locations


def _conftest_locations(request: pytest.FixtureRequest) -> LocationFactory:
    """The conftest's location factory, or its plain store factory adapted."""
    try:
        locations: LocationFactory = request.getfixturevalue(LOCATIONS_FIXTURE)
        return locations
    except pytest.FixtureLookupError:
        fresh: FreshStoreFactory = request.getfixturevalue(FACTORY_FIXTURE)
    cache = request.config.stash[_ADAPTED]
    adapted = cache.get(id(fresh))
    if adapted is None or adapted[0] is not fresh:
        adapted = (fresh, locations_from_factory(fresh))
        cache[id(fresh)] = adapted
    return adapted[1]


@pytest.fixture
def rulvar_store_capabilities(request: pytest.FixtureRequest) -> frozenset[str]:
    """Capabilities of the conftest's stores, read from their markers.

    Override in the conftest that defines the locations (or factory) fixture to
    declare them.
    """
    from rulvar_conformance.harness.certify import probe_capabilities

    locations = _conftest_locations(request)
    cache = request.config.stash[_PROBED]
    hit = cache.get(id(locations))
    if hit is None or hit[0] is not locations:
        hit = (locations, probe_capabilities(locations))
        cache[id(locations)] = hit
    return hit[1]


@pytest.fixture
def rulvar_certification(request: pytest.FixtureRequest) -> Certification:
    """The factory, capabilities and expiry ttl a kit item certifies with."""
    module = request.node.getparent(pytest.Module)
    if module is not None and module.stash.get(_MODE, None) == "url":
        _, backend = request.config.stash[_URL_TARGET]
        locations: LocationFactory = request.getfixturevalue("_rulvar_url_locations")
        return by_url(locations, request.config.stash[_URL_TARGET][0], backend)
    capabilities: frozenset[str] = request.getfixturevalue("rulvar_store_capabilities")
    return Certification(
        _conftest_locations(request), frozenset(capabilities), CERTIFY_EXPIRY_TTL_MS
    )
