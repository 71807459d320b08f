"""``pool-fairness``: a connection handed back goes to the callers waiting for one (P29).

For a store whose URL takes ``pool_max_size`` (PostgreSQL): a handle with ONE
pooled connection and a short call bound serves ``THREADS`` threads appending
at once, ``APPENDS`` each. Callers queue for the connection; every hand-back
must reach one of them. A fast path that puts the connection back among the
idle ones while callers wait leaves them timing out beside an idle connection
(``StoreUnavailableError`` after ``call_timeout_ms``). Every append must land,
none may fail. ``pool-serves-waiting-coroutines`` does the same with
coroutines on one event loop over the asyncio store. A store without the
option (an embedded one) does not run them.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any, Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.kit import (
    ConformanceSuite,
    build_check,
    not_run,
    require,
    run_concurrently,
)
from rulvar_conformance.harness.surfaces import entry
from rulvar_store import open_store, open_store_async
from rulvar_store.backend import LocationFactory, UrlOpener
from rulvar_store.errors import ConfigError

__all__ = ["SPEC", "pool_fairness_conformance"]

THREADS: Final = 6
APPENDS: Final = 25
CALL_TIMEOUT_MS: Final = 4_000
"""Far above one append's time on a loaded machine; far below the check's bound."""
LOCK_TIMEOUT_MS: Final = 2_000


def _one_connection_many_callers(locations: LocationFactory) -> None:
    location = locations()
    try:
        opener = location.opener
        if not isinstance(opener, UrlOpener):
            not_run("not a URL location: no pool option to set")
        assert isinstance(opener, UrlOpener)
        options: dict[str, Any] = {
            **opener.options,
            "pool_max_size": 1,
            "call_timeout_ms": CALL_TIMEOUT_MS,
            "lock_timeout_ms": LOCK_TIMEOUT_MS,
        }
        try:
            opening = open_store(opener.url, **options)
            opened = opening.__enter__()
        except ConfigError as exc:
            if "pool_max_size" in str(exc):
                not_run(f"the store takes no pool_max_size option: {exc}")
            raise
        try:

            def writer(number: int) -> int:
                for seq in range(1, APPENDS + 1):
                    opened.journal.append(f"pool-run-{number}", entry(seq, "w", seq))
                return APPENDS

            outcomes = run_concurrently(
                [partial(writer, number) for number in range(THREADS)]
            )
        finally:
            opening.__exit__(None, None, None)
        failed = [outcome for outcome in outcomes if not outcome.ok]
        require(
            not failed,
            f"{len(failed)} of {THREADS} callers sharing one pooled connection failed: "
            f"{failed[:2]} (P29: a connection handed back while callers wait goes to "
            "one of them, none times out beside an idle connection)",
        )
    finally:
        location.remove()


def _one_connection_many_coroutines(locations: LocationFactory) -> None:
    location = locations()
    try:
        opener = location.opener
        if not isinstance(opener, UrlOpener):
            not_run("not a URL location: no pool option to set")
        assert isinstance(opener, UrlOpener)
        options: dict[str, Any] = {
            **opener.options,
            "pool_max_size": 1,
            "call_timeout_ms": CALL_TIMEOUT_MS,
            "lock_timeout_ms": LOCK_TIMEOUT_MS,
        }

        async def main() -> list[Any]:
            async with open_store_async(opener.url, **options) as opened:

                async def writer(number: int) -> int:
                    for seq in range(1, APPENDS + 1):
                        await opened.journal.append(
                            f"pool-task-{number}", entry(seq, "w", seq)
                        )
                    return APPENDS

                return await asyncio.gather(
                    *(writer(number) for number in range(THREADS)),
                    return_exceptions=True,
                )

        try:
            outcomes = asyncio.run(main())
        except ConfigError as exc:
            if "pool_max_size" in str(exc):
                not_run(f"the store takes no pool_max_size option: {exc}")
            raise
        failed = [o for o in outcomes if isinstance(o, BaseException)]
        require(
            not failed,
            f"{len(failed)} of {THREADS} coroutines sharing one pooled connection "
            f"failed: {failed[:2]!r} (P29: a connection handed back while tasks wait "
            "goes to one of them)",
        )
    finally:
        location.remove()


def pool_fairness_conformance(certification: Certification) -> ConformanceSuite:
    """The P29 check over fresh locations."""
    return ConformanceSuite(
        "pool-fairness",
        (
            build_check(
                "pool-serves-waiting-callers",
                f"{THREADS} threads share one pooled connection: every call is served",
                ("P29", "P14"),
                partial(_one_connection_many_callers, certification.locations),
            ),
            build_check(
                "pool-serves-waiting-coroutines",
                f"{THREADS} coroutines on one loop share one pooled connection of the "
                "asyncio store: every call is served",
                ("P29", "P14"),
                partial(_one_connection_many_coroutines, certification.locations),
            ),
        ),
    )


SPEC: Final = SuiteSpec(
    "pool-fairness",
    pool_fairness_conformance,
    None,
    True,
    "one pooled connection, many callers: every hand-back reaches a waiter (P29)",
)
