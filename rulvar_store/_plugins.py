"""Backend plugins: the pluggy hook, the descriptor, and opening stores by URL.

A backend is data (``Backend``) returned from the ``rulvar_store_backends`` hook of a
module registered under the ``rulvar.stores`` entry-point group. The built-ins use
the same path, so a third-party backend is a peer of ``sqlite://``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import pluggy

from rulvar_store._location_records import (
    LocationFactory,
    OpenedStore,
)
from rulvar_store._urls import StoreUrl, parse_store_url
from rulvar_store.errors import ConfigError, MissingExtraError

if TYPE_CHECKING:
    from rulvar_store._async_protocols import AsyncOpenedStore

__all__ = [
    "ENTRY_POINT_GROUP",
    "Backend",
    "BackendInfo",
    "hookimpl",
    "hookspec",
    "install_hint",
    "list_backends",
    "make_plugin_manager",
    "open_store",
    "resolve_backend",
]

PROJECT_NAME: Final = "rulvar"
ENTRY_POINT_GROUP: Final = "rulvar.stores"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

# Capability names a backend may claim; `rulvar stores` prints them.
CAPABILITIES: Final = (
    "leases",
    "meta_lookup",
    "fenced_writes",
    "fenced_transcripts",
    "single_writer_files",
)


@dataclass(frozen=True, slots=True)
class Backend:
    """What a plugin tells the registry about one backend.

    Attributes:
        name: short name shown by ``rulvar stores``.
        schemes: URL schemes it opens, lower case.
        open: builds the stores from a parsed URL; may import drivers lazily.
        open_async: builds native asyncio stores from a parsed URL (their class
            declares ``async_api = True``); ``None`` serves ``open_store_async``
            through the generic adapter, one worker-thread hop per call.
        capabilities: names from ``CAPABILITIES`` the backend's stores declare.
        requires: importable modules the backend needs; missing ones name ``extra``.
        extra: the ``rulvar-stores`` extra that installs ``requires``.
        certify: yields a ``LocationFactory`` of fresh isolated locations next
            to the URL's (new files, directories or schemas), for ``rulvar
            check``, the kill points and the soak; removes them all on exit.
            Before yielding it validates the URL exactly as ``open`` would
            (options, path, reachability) without creating anything of the
            user's, and raises ``ConfigError`` (or ``StoreUnavailableError``
            for an unreachable server) so ``rulvar check`` fails in one line.
        certify_expiry_ttl_ms: the short ttl of the kit's wall-clock expiry check;
            a backend with network round trips or a server clock picks more.
        description: one line for listings.
    """

    name: str
    schemes: tuple[str, ...]
    open: Callable[[StoreUrl], OpenedStore]
    capabilities: frozenset[str] = frozenset()
    requires: tuple[str, ...] = ()
    extra: str | None = None
    certify: Callable[[StoreUrl], AbstractContextManager[LocationFactory]] | None = None
    certify_expiry_ttl_ms: int = 600
    description: str = ""
    open_async: Callable[[StoreUrl], Awaitable[AsyncOpenedStore]] | None = None


@dataclass(frozen=True, slots=True)
class BackendInfo:
    """A registered backend and the distribution it comes from."""

    backend: Backend
    plugin_name: str
    distribution: str | None
    installed: bool = field(default=True)


class _BackendSpecs:
    @hookspec
    def rulvar_store_backends(self) -> Sequence[Backend]:  # type: ignore[empty-body]  # a spec has no body
        """Return the backends this plugin provides."""


def make_plugin_manager(*, load_entry_points: bool = True) -> pluggy.PluginManager:
    """Build a plugin manager with the hook spec; entry points loaded unless told not to."""
    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(_BackendSpecs)
    if load_entry_points:
        manager.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    return manager


def _missing_modules(backend: Backend) -> list[str]:
    return [name for name in backend.requires if importlib.util.find_spec(name) is None]


def _listed(names: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} and {names[-1]}"


def _iter_backends(
    manager: pluggy.PluginManager, *, named: bool = True
) -> Iterator[BackendInfo]:
    # A distribution's name comes from parsing its metadata file (several ms per
    # open); only listings show it, so opening a store skips it (``named``).
    distributions = (
        {
            id(plugin): dist.project_name
            for plugin, dist in manager.list_plugin_distinfo()
        }
        if named
        else {}
    )
    for plugin in manager.get_plugins():
        hook_impl = getattr(plugin, "rulvar_store_backends", None)
        if hook_impl is None:
            continue
        plugin_name = manager.get_name(plugin) or repr(plugin)
        for backend in hook_impl():
            yield BackendInfo(
                backend=backend,
                plugin_name=plugin_name,
                distribution=distributions.get(id(plugin)),
                installed=not _missing_modules(backend),
            )


def install_hint(backend: Backend) -> str | None:
    """What to install before ``backend`` can open anything; ``None`` when it can.

    Names the missing modules and the ``rulvar-stores`` extra that brings them
    (a third-party backend without one: the modules themselves).
    """
    missing = _missing_modules(backend)
    if not missing:
        return None
    how = (
        f"pip install 'rulvar-stores[{backend.extra}]'"
        if backend.extra
        else "install " + ", ".join(missing)
    )
    verb = "is" if len(missing) == 1 else "are"
    return f"needs {_listed(missing)}, which {verb} not installed: {how}"


def list_backends(manager: pluggy.PluginManager | None = None) -> list[BackendInfo]:
    """Return every registered backend, sorted by name."""
    manager = manager if manager is not None else make_plugin_manager()
    return sorted(_iter_backends(manager), key=lambda info: info.backend.name)


_INSTALLED: list[BackendInfo] | None = None


def _installed_backends() -> list[BackendInfo]:
    """The backends the installed distributions register, read once per process.

    Scanning every distribution's entry points took about 2 ms of each open;
    what is installed does not change under a running process (a backend
    installed meanwhile is seen after a restart, and by ``list_backends``).
    Whether a backend's driver imports is still checked at every open.
    """
    global _INSTALLED
    if _INSTALLED is None:
        _INSTALLED = sorted(
            _iter_backends(make_plugin_manager(), named=False),
            key=lambda info: info.backend.name,
        )
    return _INSTALLED


def resolve_backend(
    url: StoreUrl, manager: pluggy.PluginManager | None = None
) -> Backend:
    """Return the backend that opens ``url``'s scheme, with its driver importable.

    Raises:
        ConfigError: no backend claims the scheme; its subclass MissingExtraError
            when the backend's extra is not installed.
    """
    infos = (
        _installed_backends()
        if manager is None
        else sorted(
            _iter_backends(manager, named=False), key=lambda info: info.backend.name
        )
    )
    for info in infos:
        if url.scheme in info.backend.schemes:
            hint = install_hint(info.backend)
            if hint is not None:
                raise MissingExtraError(
                    f"backend {info.backend.name!r} for {url.scheme}:// {hint}",
                    _missing_modules(info.backend)[0],
                )
            return info.backend
    known = sorted(scheme for info in infos for scheme in info.backend.schemes)
    raise ConfigError(
        f"no store backend for scheme {url.scheme!r} in {url.redacted!r}; "
        f"installed schemes: {', '.join(known) or 'none'} "
        f"(backends register under the {ENTRY_POINT_GROUP!r} entry-point group)"
    )


def open_store(
    url: str,
    *,
    manager: pluggy.PluginManager | None = None,
    **options: Any,
) -> OpenedStore:
    """Open the journal and transcript stores that ``url`` names.

    Options come from the URL's query string and from keyword arguments (which win),
    e.g. ``open_store("sqlite:///runs.db", ttl_ms=30_000)``.

    Raises:
        ConfigError: malformed URL, unknown scheme, missing extra or a bad option.
    """
    parsed = parse_store_url(url, options)
    backend = resolve_backend(parsed, manager)
    return backend.open(parsed)
