"""``rulvar runs list --orphans``: journals without a meta, blobs without a journal (V11).

Added to the ``list`` command from here, so ``runs.py`` keeps only its
registration line. ``runs audit`` reports the same orphans as ``suspect`` (the
library's ``iter_run_audits`` yields them), and ``--repair`` leaves them (A3).
"""

from __future__ import annotations

import functools
import json
from typing import Any

import click

from rulvar_cli._common import plural
from rulvar_cli._operator import (
    Watchdog,
    open_for_operator,
    sanitize,
    store_did_not_answer,
)
from rulvar_store.errors import StoreBusyError, StoreUnavailableError

__all__ = ["add_orphans_option"]


def _list_orphans(url: str, as_json: bool, timeout_s: float) -> None:
    from rulvar_store.ops import iter_orphans

    rows: list[dict[str, Any]] = []
    watchdog = Watchdog(timeout_s)
    try:
        with open_for_operator(
            url, write=False, timeout_s=timeout_s, watchdog=watchdog
        ) as opened:
            if not as_json:
                click.echo(f"{'RUN':<28} {'ORPHAN':<8} REASON")
            for orphan in watchdog.pace(
                iter_orphans(opened.journal), "listing orphans"
            ):
                rows.append(
                    {
                        "runId": orphan.run_id,
                        "kind": orphan.kind,
                        "reason": orphan.reason,
                    }
                )
                if not as_json:
                    click.echo(
                        f"{sanitize(orphan.run_id):<28} {orphan.kind:<8} {orphan.reason}"
                    )
    except (StoreBusyError, StoreUnavailableError) as exc:
        store_did_not_answer(exc, timeout_s)
    finally:
        watchdog.stop()
    if as_json:
        click.echo(
            json.dumps(
                {"orphans": rows, "count": len(rows)}, indent=2, ensure_ascii=False
            )
        )
    click.echo(plural(len(rows), "orphan"), err=True)


def add_orphans_option(group: click.Group) -> None:
    """Give ``runs list`` an ``--orphans`` switch that lists orphans instead of runs."""
    command = group.commands.get("list")
    if command is None or command.callback is None:
        return
    original = command.callback
    command.params.append(
        click.Option(
            ["--orphans"],
            is_flag=True,
            help="List orphans instead: journals without a meta, blobs without a journal.",
        )
    )

    @functools.wraps(original)
    def callback(*args: Any, orphans: bool = False, **kwargs: Any) -> Any:
        if not orphans:
            return original(*args, **kwargs)
        _list_orphans(kwargs["url"], kwargs["as_json"], kwargs["timeout_s"])
        return None

    command.callback = callback
