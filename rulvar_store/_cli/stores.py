"""``rulvar stores``: the installed backends, their schemes and capabilities."""

from __future__ import annotations

import json
from typing import Any

import click

from rulvar_store._plugins import BackendInfo, list_backends

__all__ = ["stores_command"]


def _backend_row(info: BackendInfo) -> dict[str, Any]:
    backend = info.backend
    return {
        "name": backend.name,
        "schemes": list(backend.schemes),
        "capabilities": sorted(backend.capabilities),
        "distribution": info.distribution,
        "installed": info.installed,
        "extra": backend.extra,
        "description": backend.description,
    }


@click.command("stores")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def stores_command(as_json: bool) -> None:
    """List installed store backends, their URL schemes and capabilities."""
    rows = [_backend_row(info) for info in list_backends()]
    if as_json:
        click.echo(json.dumps({"backends": rows}, indent=2))
        return
    click.echo(f"{'SCHEME':<14} {'CAPABILITIES':<52} DISTRIBUTION")
    for row in rows:
        schemes = ", ".join(f"{scheme}://" for scheme in row["schemes"])
        capabilities = ", ".join(row["capabilities"]) or "-"
        origin = row["distribution"] or "-"
        if not row["installed"]:
            origin += f"  (not usable: pip install 'rulvar-stores[{row['extra']}]')"
        click.echo(f"{schemes:<14} {capabilities:<52} {origin}")
