"""``async-load-since-after-delete`` (Y9, X10): the async incremental read across a delete.

A row of the loop-health suite (the asyncio path's own suite), so it runs on
the native async store the way an asyncio caller holds it: ONE handle that
polls, deletes and writes the run again, beside a second handle that deletes
it too. X10's rule for a cursor issued before a delete, on the async surface:

- after the run is deleted (by this handle or another), ``load_since`` with
  the old cursor and with none returns no entry, and ``load`` returns none;
- once the run is written again, the old cursor reports ``restarted`` with the
  new journal whole (never the old entries, never the new ones as a tail), and
  the cursor it hands back continues the new incarnation.

A store that keeps a tail per run in the async handle (a poll answered from
memory) and does not drop it on delete answers the old entries after the
delete, or the new journal as a tail of the old one.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from rulvar_conformance.harness.kit import not_run, require
from rulvar_conformance.harness.site import at_fresh_location
from rulvar_store import AsyncOpenedStore
from rulvar_store.backend import LocationFactory, StoreLocation

__all__ = ["async_load_since_after_delete"]

RUN: Final = "async-since-run"


def _keys(entries: list[Any]) -> list[str]:
    return [str(item.get("key")) for item in entries]


def _entry(by: str, tag: int) -> dict[str, Any]:
    return {"kind": "step", "key": f"{by}-{tag}", "value": tag}


async def _write(journal: Any, by: str, count: int) -> None:
    for tag in range(1, count + 1):
        await journal.append(RUN, _entry(by, tag))


async def _deleted(journal: Any, cursor: str, who: str) -> list[str]:
    """What is wrong with polls of ``journal`` after ``who`` deleted the run."""
    wrong: list[str] = []
    old = await journal.load_since(RUN, cursor)
    if old.entries:
        wrong.append(
            f"after {who} deleted the run, the old cursor returned {_keys(old.entries)}"
        )
    fresh = await journal.load_since(RUN, None)
    if fresh.entries:
        wrong.append(
            f"after {who} deleted the run, load_since without a cursor returned "
            f"{_keys(fresh.entries)}"
        )
    loaded = await journal.load(RUN)
    if loaded:
        wrong.append(f"after {who} deleted the run, load returned {_keys(loaded)}")
    return wrong


async def _restarts(journal: Any, cursor: str, expected: list[str]) -> list[str]:
    tail = await journal.load_since(RUN, cursor)
    got = _keys(tail.entries)
    if not tail.restarted or got != expected:
        return [
            f"the re-created run's poll with the old cursor returned {got} "
            f"(restarted={tail.restarted}); expected {expected} with restarted"
        ]
    after = await journal.load_since(RUN, tail.cursor)
    if after.entries or after.restarted:
        return [
            f"the cursor handed back after the restart did not continue the new "
            f"journal: next poll {_keys(after.entries)}, restarted={after.restarted}"
        ]
    return []


async def _scenario(
    open_async: Any, location: StoreLocation, shared: bool
) -> list[str]:
    opened: AsyncOpenedStore = await open_async(location)
    other: AsyncOpenedStore | None = await open_async(location) if shared else None
    try:
        journal: Any = opened.journal
        if not callable(getattr(journal, "load_since", None)):
            return ["no load_since"]
        wrong: list[str] = []
        # This handle polls, deletes and polls again.
        await _write(journal, "old", 3)
        first = await journal.load_since(RUN, None)
        require(_keys(first.entries) == ["old-1", "old-2", "old-3"], "first poll wrong")
        await journal.delete(RUN)
        wrong += await _deleted(journal, first.cursor, "this handle")
        # Written again with more entries: the old cursor restarts with all of them.
        await _write(journal, "new", 4)
        wrong += await _restarts(
            journal, first.cursor, [f"new-{n}" for n in range(1, 5)]
        )
        if other is not None:
            # Another handle deletes the run under this one's cursor.
            before = await journal.load_since(RUN, None)
            await other.journal.delete(RUN)
            wrong += await _deleted(journal, before.cursor, "another handle")
            await _write(other.journal, "newer", 1)
            wrong += await _restarts(journal, before.cursor, ["newer-1"])
        return wrong
    finally:
        if other is not None:
            await other.aclose()
        await opened.aclose()


def async_load_since_after_delete(
    locations: LocationFactory, open_async: Any, said: list[str]
) -> None:
    """The check's body: one location, the scenario on its own event loop."""
    with at_fresh_location(locations) as site:
        shared = site.location.shared
        wrong = asyncio.run(_scenario(open_async, site.location, shared))
        if wrong == ["no load_since"]:
            not_run("the async store has no load_since")
        if not shared:
            said.append("one handle only (the location is not shared)")
        require(
            not wrong,
            "; ".join(wrong)
            + " (Y9: the async load_since keeps X10's rule across a delete)",
        )
