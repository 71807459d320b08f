"""``run_fault_soak``: the multi-process soak on a private PostgreSQL cluster, under faults.

``network``: each writer is a host (a network namespace on a private bridge as
root, else behind a loopback fault proxy) and the chaos cuts holders off past
their ttl, resets connections and slows links. ``server``: the chaos SIGKILLs
the whole server and starts it again (crash recovery), more than once.

The cluster is the soak's own (``PrivateCluster``): the user's server is never
cut, killed or reconfigured. Writers reach it through libpq's environment
(``PGHOST``/``PGPORT`` per host) with short TCP bounds in the URL, so a call
over a dead link fails as ``StoreUnavailableError`` in about a second instead
of blocking for the kernel's retransmission minutes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Final

from rulvar_conformance.faults.chaos import FaultDriver, NetworkFaults, ServerFaults
from rulvar_conformance.faults.netns import HostFabric, netns_available
from rulvar_conformance.faults.pg_cluster import PrivateCluster, free_port
from rulvar_conformance.faults.profiles import FaultProfile
from rulvar_conformance.faults.proxy import FaultProxy
from rulvar_store import ConfigError
from rulvar_store.backend import StoreLocation, parse_store_url, resolve_backend

if TYPE_CHECKING:
    from rulvar_conformance.soak.runner import SoakResult
    from rulvar_conformance.soak.summary import SoakActivity

__all__ = ["CLIENT_BOUNDS", "run_fault_soak"]

CLIENT_BOUNDS: Final = (
    "keepalives=1&keepalives_idle=1&keepalives_interval=1&keepalives_count=2"
    "&tcp_user_timeout=1000&connect_timeout_s=2"
)
"""libpq's TCP bounds plus the store's connect bound: a dead link fails in ~1-2 s."""


@contextmanager
def _environment(**values: str) -> Iterator[None]:
    """Set libpq's environment for this process (the referee's reads), then restore it."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_fault_soak(
    profile: FaultProfile,
    *,
    writers: int | None = None,
    seconds: float | None = None,
    seed: int | None = None,
    report_dir: str | os.PathLike[str] | None = None,
    on_progress: Callable[[float, SoakActivity], None] | None = None,
    force_proxy: bool = False,
    server_settings: dict[str, str] | None = None,
    wrap: Callable[[StoreLocation], StoreLocation] | None = None,
) -> SoakResult:
    """Soak a private cluster under ``profile.kind`` faults; never raises on violations.

    ``force_proxy``: use the loopback proxy even where namespaces can be made.
    ``server_settings``: over the private cluster's own (``PrivateCluster.settings``).
    ``wrap``: replaces the fresh location (a test's seeded store defect).

    Raises:
        ConfigError: no PostgreSQL server binaries, or the cluster or the hosts
            could not be set up.
    """
    from rulvar_conformance.soak.runner import run_profile_soak

    if profile.kind not in ("network", "server"):
        raise ConfigError(f"no fault kind {profile.kind!r}: network or server")
    storm = profile.storm
    n_writers = writers or storm.writers
    with ExitStack() as stack:
        fabric: HostFabric | None = None
        proxy: FaultProxy | None = None
        address = "127.0.0.1"
        if profile.kind == "network" and not force_proxy and netns_available() is None:
            fabric = HostFabric(n_writers).open()
            stack.callback(fabric.close)
            address = fabric.server_address
        cluster = PrivateCluster(address, free_port(), dict(server_settings or {}))
        stack.callback(cluster.destroy)
        cluster.init()
        cluster.start()
        stack.enter_context(
            _environment(PGHOST=cluster.socket_dir, PGPORT=str(cluster.port))
        )
        driver: FaultDriver
        if profile.kind == "server":
            driver = ServerFaults(profile.plan, cluster)
        else:
            if fabric is None:
                proxy = FaultProxy(n_writers, address, cluster.port)
                stack.callback(proxy.close)
            driver = NetworkFaults(
                profile.plan, cluster, storm.ttl_ms, fabric=fabric, proxy=proxy
            )
        parsed = parse_store_url(f"{cluster.url(host=False)}?{CLIENT_BOUNDS}")
        backend = resolve_backend(parsed)
        assert backend.certify is not None  # PostgreSQL certifies fresh schemas
        certified = stack.enter_context(backend.certify(parsed))
        fresh = certified()
        location = wrap(fresh) if wrap is not None else fresh
        try:
            return run_profile_soak(
                location,
                storm,
                writers=n_writers,
                seconds=seconds,
                seed=seed,
                report_dir=report_dir,
                on_progress=on_progress,
                faults=driver,
                outage_s=profile.outage_s,
            )
        finally:
            fresh.remove()
    raise AssertionError("unreachable")  # pragma: no cover - the with returns or raises
