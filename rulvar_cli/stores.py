"""``rulvar stores``: the installed backends, their schemes and capabilities."""

from __future__ import annotations

import json
from typing import Any

import click

from rulvar_cli._common import STORES_EXIT_CODES_HELP
from rulvar_store import BackendInfo, list_backends
from rulvar_store.backend import install_hint

__all__ = ["stores_command"]


def _backend_row(info: BackendInfo) -> dict[str, Any]:
    backend = info.backend
    return {
        "name": backend.name,
        "schemes": list(backend.schemes),
        "capabilities": sorted(backend.capabilities),
        "distribution": info.distribution,
        "installed": info.installed,
        # What to install before it opens anything (None: nothing missing).
        "install": install_hint(backend),
        # open_store_async serves every backend; "native" ones have their own
        # async stores, the others run each call on a worker thread (adapter).
        "async": "native" if backend.open_async is not None else "adapter",
        "extra": backend.extra,
        "description": backend.description,
    }


@click.command("stores", epilog=STORES_EXIT_CODES_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def stores_command(as_json: bool) -> None:
    """List installed store backends: URL schemes, capabilities, native or adapted async."""
    rows = [_backend_row(info) for info in list_backends()]
    if as_json:
        click.echo(json.dumps({"backends": rows}, indent=2))
        return
    table = [("SCHEME", "CAPABILITIES", "ASYNC", "DISTRIBUTION")]
    for row in rows:
        origin = row["distribution"] or "-"
        if row["install"] is not None:
            origin += f"  (not usable: {row['install']})"
        table.append(
            (
                ", ".join(f"{scheme}://" for scheme in row["schemes"]),
                ", ".join(row["capabilities"]) or "-",
                row["async"],
                origin,
            )
        )
    # Columns as wide as their longest cell, so long rows stay aligned.
    widths = [max(len(line[column]) for line in table) for column in range(3)]
    for schemes, capabilities, async_api, origin in table:
        click.echo(
            f"{schemes:<{widths[0]}}  {capabilities:<{widths[1]}}  "
            f"{async_api:<{widths[2]}}  {origin}"
        )
