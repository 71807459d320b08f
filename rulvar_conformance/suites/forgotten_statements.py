"""``forgotten-statements``: a store whose server forgot its prepared statements recovers (P23).

A store that prepares statements on its server connections (PostgreSQL's fast
paths) keeps a note of what each session has prepared. A pooler's reset
(PgBouncer's ``DISCARD ALL``) or an admin's ``DEALLOCATE ALL`` in that session
empties the server's side behind the note. The store must prepare again and
serve the call: no failed call, no raw driver error.

For a location reached over TCP (its ``NetworkRoute``) the kit opens a handle
through a ``ForgettingProxy``, warms it with one round of every surface
(append, load, ``load_since``, metas, listing, lease calls, blob put and the
hot blob reads), then runs rounds in which, before EACH call, every server
session of the handle is made to forget its prepared statements at its next
moment of rest (``DEALLOCATE ALL``, as an admin does, and in the middle round
``DISCARD ALL``, a pooler's reset). Every call must succeed and the data must read back whole,
and the sessions' own settings (``pg_settings`` whose source is the session:
the store's ``SET``s, which ``DISCARD ALL`` resets too) must read after the
rounds as they read after the warm round (P24).
``async-store-reprepares-forgotten`` does the same through
``open_store_async`` (a URL location). A location without a route (an embedded
store) does not run them, nor a location other than a PostgreSQL URL (the
proxy speaks PostgreSQL's protocol), nor one the proxy could not inject into
(a client that requires TLS); the row says why.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from typing import Any, Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.kit import (
    ConformanceCheck,
    ConformanceSuite,
    build_check,
    not_run,
    require,
)
from rulvar_conformance.harness.pg_forget import ForgettingProxy
from rulvar_conformance.harness.surfaces import blob, entry, meta
from rulvar_store import open_store_async
from rulvar_store.backend import LocationFactory, UrlOpener

__all__ = ["ROUNDS", "SPEC", "forgotten_statements_conformance"]

ROUNDS: Final = 3
"""Rounds of calls each preceded by a forget (after one warm round)."""
FORGETTING: Final = ("DEALLOCATE ALL", "DISCARD ALL")
"""What the server runs in the session: rounds 1 and 3 deallocate, round 2
discards (as PgBouncer's reset does)."""
SESSION_SETTINGS: Final = (
    "SELECT coalesce(string_agg(name || '=' || setting, ',' ORDER BY name), '') "
    "FROM pg_settings WHERE source = 'session'"
)
"""What a session set for itself (not the server's or the role's defaults)."""
RUN: Final = "forgotten-statements-run"
OWNER: Final = "forgetting-holder"

# One call: (what the report names, "journal" or "blobs", method, arguments).
# ``LEASE`` in the arguments stands for the round's lease.
Call = tuple[str, str, str, tuple[Any, ...]]
LEASE: Final = object()
POSTGRES_SCHEMES: Final = frozenset({"postgresql", "postgres"})


def _calls(number: int) -> Iterator[Call]:
    """One round: every surface the fast paths serve, the lease's calls around them."""
    seq, ref = number + 1, f"{RUN}/b/{number}"
    yield ("append", "journal", "append", (RUN, entry(seq, "forget", seq), LEASE))
    yield ("load", "journal", "load", (RUN,))
    yield ("load_since", "journal", "load_since", (RUN, None))
    yield ("put_meta", "journal", "put_meta", (meta(RUN, "forget", seq), LEASE))
    yield ("get_meta", "journal", "get_meta", (RUN,))
    yield ("list_runs", "journal", "list_runs", ())
    yield ("renew", "journal", "renew", (LEASE,))
    yield ("blob put", "blobs", "put", (ref, blob("forget", seq), LEASE))
    yield ("blob get", "blobs", "get", (ref,))
    yield ("list_refs", "blobs", "list_refs", (RUN,))
    yield ("last_ref", "blobs", "last_ref", (RUN, f"{RUN}/b/"))
    yield ("get_under", "blobs", "get_under", (RUN, f"{RUN}/b/"))


def _bound(target: Any, call: Call, lease: Any) -> Any:
    """The method of ``call`` on ``target`` with the lease filled in, or ``None``."""
    method = getattr(target, call[2], None)
    if method is None:
        return None  # a surface this store does not offer (last_ref, get_under, ...)
    args = tuple(lease if arg is LEASE else arg for arg in call[3])
    return partial(method, *args)


def _judge(
    proxy: ForgettingProxy,
    failures: list[str],
    said: list[str],
    settings: tuple[list[str | None], list[str | None]],
) -> None:
    require(
        not failures,
        f"{len(failures)} call(s) failed after the server forgot the session's "
        f"prepared statements: {failures[:3]} (P23: a statement the server forgot "
        "is prepared again, the call served)",
    )
    if proxy.refused:
        not_run(f"the server refused the injected statement: {proxy.refused[:1]}")
    if proxy.forgotten == 0:
        not_run(
            "the proxy found no moment of rest to inject into (a client that "
            "requires TLS, or no server session): nothing was forgotten"
        )
    before, after = settings
    if not before or not after:
        not_run("the proxy read no session settings (no moment of rest to ask in)")
    require(
        set(after) <= set(before),
        f"the sessions' own settings after the rounds {sorted(set(after), key=str)} "
        f"differ from those after the warm round {sorted(set(before), key=str)} "
        "(P24: a session the server reset, DISCARD ALL, gets the store's "
        "settings again before it serves a call)",
    )
    said.append(
        f"the server forgot the session's prepared statements {proxy.forgotten} "
        f"times ({' / '.join(FORGETTING)}); every call served, the sessions' "
        "settings kept"
    )


def _postgres_opener(opener: object) -> UrlOpener:
    """``opener`` if it opens a PostgreSQL URL; else the check does not run.

    The proxy reads and writes PostgreSQL's wire protocol: in front of any other
    server it would corrupt the stream, and no other store prepares this way.
    """
    url = opener.url if isinstance(opener, UrlOpener) else ""
    if url.partition("://")[0].lower() not in POSTGRES_SCHEMES:
        not_run("not a PostgreSQL URL: the proxy speaks PostgreSQL's protocol only")
    assert isinstance(opener, UrlOpener)
    return opener


def _check_data(entries: list[Any], got: bytes | None) -> list[str]:
    wrong: list[str] = []
    seqs = [item.get("seq") for item in entries]
    if seqs != list(range(1, ROUNDS + 2)):
        wrong.append(f"load after the rounds: seqs {seqs}, expected 1..{ROUNDS + 1}")
    if got != blob("forget", ROUNDS + 1):
        wrong.append(f"the last blob read back as {got!r}")
    return wrong


def _sync_store(locations: LocationFactory, said: list[str]) -> None:
    location = locations()
    try:
        route = location.route
        if route is None:
            not_run(f"location {location.name!r} declares no TCP route: no server")
            return
        with ForgettingProxy(route.address) as proxy:
            opened = _postgres_opener(route.via(*proxy.address))(60_000, None, False)
            failures: list[str] = []
            try:
                journal: Any = opened.journal
                blobs = opened.transcripts
                lease = journal.acquire(RUN, OWNER)
                before: list[str | None] = []
                for number in range(ROUNDS + 1):
                    if number == 1:  # warm: every session made has its settings
                        before = _settings_read(proxy, journal, failures)
                    for call in _calls(number):
                        run = _bound(
                            journal if call[1] == "journal" else blobs, call, lease
                        )
                        if run is None:
                            continue
                        if number:  # the warm round prepares; the rest forget
                            proxy.forget(FORGETTING[(number + 1) % 2])
                        try:
                            run()
                        except Exception as exc:  # reported, not raised
                            failures.append(_named(number, call, exc))
                after = _settings_read(proxy, journal, failures)
                if not failures:
                    failures += _check_data(
                        journal.load(RUN), blobs.get(f"{RUN}/b/{ROUNDS}")
                    )
                proxy.forget()
                try:
                    journal.release(lease)
                except Exception as exc:
                    failures.append(f"release: {type(exc).__name__}: {exc}")
            finally:
                opened.close()
            _judge(proxy, failures, said, (before, after))
    finally:
        location.remove()


def _async_store(locations: LocationFactory, said: list[str]) -> None:
    location = locations()
    try:
        route = location.route
        if route is None:
            not_run(f"location {location.name!r} declares no TCP route: no server")
            return
        with ForgettingProxy(route.address) as proxy:
            opener = _postgres_opener(route.via(*proxy.address))
            failures, settings = asyncio.run(_async_rounds(opener, proxy))
            _judge(proxy, failures, said, settings)
    finally:
        location.remove()


async def _async_rounds(
    opener: UrlOpener, proxy: ForgettingProxy
) -> tuple[list[str], tuple[list[str | None], list[str | None]]]:
    failures: list[str] = []
    before: list[str | None] = []
    async with open_store_async(
        opener.url, **opener.options_for(60_000, None, False)
    ) as opened:
        journal: Any = opened.journal
        blobs = opened.transcripts
        lease = await journal.acquire(RUN, OWNER)
        for number in range(ROUNDS + 1):
            if number == 1:
                before = await _settings_read_async(proxy, journal, failures)
            for call in _calls(number):
                run = _bound(journal if call[1] == "journal" else blobs, call, lease)
                if run is None:
                    continue
                if number:
                    proxy.forget(FORGETTING[(number + 1) % 2])
                try:
                    outcome = run()
                    if inspect.isawaitable(outcome):
                        await outcome
                except Exception as exc:  # reported, not raised
                    failures.append(_named(number, call, exc))
        after = await _settings_read_async(proxy, journal, failures)
        if not failures:
            failures += _check_data(
                await journal.load(RUN), await blobs.get(f"{RUN}/b/{ROUNDS}")
            )
        proxy.forget()
        try:
            await journal.release(lease)
        except Exception as exc:
            failures.append(f"release: {type(exc).__name__}: {exc}")
    return failures, (before, after)


def _settings_read(
    proxy: ForgettingProxy, journal: Any, failures: list[str]
) -> list[str | None]:
    """The settings the sessions set for themselves, read at the rest before a
    ``get_meta`` (whose failure is reported, not raised)."""
    proxy.answers.clear()
    proxy.ask(SESSION_SETTINGS)
    try:
        journal.get_meta(RUN)
    except Exception as exc:
        failures.append(f"get_meta (settings read): {type(exc).__name__}: {exc}")
    return list(proxy.answers)


async def _settings_read_async(
    proxy: ForgettingProxy, journal: Any, failures: list[str]
) -> list[str | None]:
    """``_settings_read`` through the asyncio store."""
    proxy.answers.clear()
    proxy.ask(SESSION_SETTINGS)
    try:
        await journal.get_meta(RUN)
    except Exception as exc:
        failures.append(f"get_meta (settings read): {type(exc).__name__}: {exc}")
    return list(proxy.answers)


def _named(number: int, call: Call, exc: BaseException) -> str:
    kind = type(exc)
    when = f"round {number}" if number else "the warm round, before any forget"
    return f"{call[0]} ({when}): {kind.__module__}.{kind.__name__}: {exc}"


def forgotten_statements_conformance(certification: Certification) -> ConformanceSuite:
    """The P23 checks over fresh locations."""
    return ConformanceSuite(
        "forgotten-statements",
        (
            _noted(
                "store-reprepares-forgotten",
                "the server forgets the session's prepared statements before each "
                "call (DEALLOCATE ALL, DISCARD ALL): every call is served, the "
                "sessions' settings kept",
                ("P23", "P24"),
                partial(_sync_store, certification.locations),
            ),
            _noted(
                "async-store-reprepares-forgotten",
                "the same through the asyncio store (open_store_async)",
                ("P23", "P24", "Y1"),
                partial(_async_store, certification.locations),
            ),
        ),
    )


def _noted(
    check_id: str,
    title: str,
    clauses: tuple[str, ...],
    body: Callable[[list[str]], None],
) -> ConformanceCheck:
    """A check whose row says how many times the server forgot (``did: ...``)."""
    said: list[str] = []

    def run() -> None:
        said.clear()
        body(said)

    check = build_check(check_id, title, clauses, run)
    return replace(check, note=lambda: "; ".join(said) or None)


SPEC: Final = SuiteSpec(
    "forgotten-statements",
    forgotten_statements_conformance,
    None,
    True,  # about a second on a networked store; an embedded one does not run it
    "the server forgets prepared statements mid-work: the store re-prepares (P23)",
)
