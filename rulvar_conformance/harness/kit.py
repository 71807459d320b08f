"""The kit's skeleton: checks, suites, the failure type and the shared helpers.

A check is a named, clause-tagged zero-argument callable. Its body reports a broken
obligation through ``require`` (or any exception); ``ConformanceCheck.run`` turns
whatever escapes into one ``ConformanceFailure`` that names the check, so a failing
store always tells you which row of CONTRACT section 8 it broke.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Generic, TypeAlias, TypeVar

from rulvar_store.backend import stable_stringify

if TYPE_CHECKING:
    from _pytest.mark.structures import ParameterSet

__all__ = [
    "CheckNotRun",
    "ConformanceCheck",
    "ConformanceFailure",
    "ConformanceSuite",
    "Fresh",
    "Outcome",
    "attempt",
    "build_check",
    "each_fresh",
    "error_code",
    "not_run",
    "pytest_params",
    "require",
    "run_concurrently",
    "same_json",
    "using",
]

T = TypeVar("T")
S = TypeVar("S")

# A thread that has not finished by then is stuck (a deadlocked store, a lost
# wake-up); the check reports it instead of hanging the test session.
THREAD_TIMEOUT_S: Final = 60.0


class ConformanceFailure(AssertionError):
    """A store broke the obligation of one check: ``store-conformance <id>: <detail>``."""

    def __init__(self, check_id: str, detail: str) -> None:
        super().__init__(check_id, detail)
        self.check_id = check_id
        self.detail = detail

    def __str__(self) -> str:
        return f"store-conformance {self.check_id}: {self.detail}"


class CheckNotRun(Exception):
    """A check could not run against this store: ``reason`` says what it lacks.

    Never a pass and never a failure: ``rulvar check`` shows it as NOT RUN with the
    reason, the pytest plugin as a skip.
    """

    def __init__(self, check_id: str, reason: str) -> None:
        super().__init__(check_id, reason)
        self.check_id = check_id
        self.reason = reason

    def __str__(self) -> str:
        return f"store-conformance {self.check_id}: not run: {self.reason}"


class _NotRunSignal(Exception):
    """Raised inside a check body by ``not_run``; ``ConformanceCheck.run`` names the check."""


def not_run(reason: str) -> None:
    """Stop the running check as not run (the store cannot offer what it needs)."""
    raise _NotRunSignal(reason)


class _Violation(AssertionError):
    """Raised inside a check body; ``ConformanceCheck.run`` names the check."""


def require(condition: object, detail: str) -> None:
    """Fail the running check with ``detail`` unless ``condition`` holds.

    Unlike ``assert`` this survives ``python -O``.
    """
    if not condition:
        raise _Violation(detail)


@dataclass(frozen=True)
class ConformanceCheck:
    """One obligation: ``run()`` returns quietly or raises ``ConformanceFailure``."""

    id: str
    title: str
    run: Callable[[], None]
    clauses: tuple[str, ...] = ()
    # What the last run did, for its report row (faults injected, figures).
    note: Callable[[], str | None] | None = None


@dataclass(frozen=True)
class ConformanceSuite:
    """An ordered set of checks over one store factory."""

    name: str
    checks: tuple[ConformanceCheck, ...]

    def run(self) -> None:
        """Run every check in order; the first violation raises ``ConformanceFailure``."""
        for check in self.checks:
            check.run()

    def check(self, check_id: str) -> ConformanceCheck:
        """Return the check named ``check_id``.

        Raises:
            KeyError: the suite has no such check.
        """
        for check in self.checks:
            if check.id == check_id:
                return check
        raise KeyError(f"suite {self.name!r} has no check {check_id!r}")


def build_check(
    check_id: str, title: str, clauses: Sequence[str], body: Callable[[], None]
) -> ConformanceCheck:
    """Wrap ``body`` so that anything it raises becomes a ``ConformanceFailure``."""

    def run() -> None:
        try:
            body()
        except (ConformanceFailure, CheckNotRun):
            raise
        except _NotRunSignal as exc:
            raise CheckNotRun(check_id, str(exc)) from None
        except _Violation as exc:
            raise ConformanceFailure(check_id, str(exc)) from exc
        except Exception as exc:
            detail = f"unexpected {type(exc).__name__}: {exc}"
            raise ConformanceFailure(check_id, detail) from exc

    return ConformanceCheck(check_id, title, run, tuple(clauses))


def pytest_params(suite: ConformanceSuite) -> list[ParameterSet]:
    """Return one ``pytest.param`` per check, id'd by check id, marked with its clauses.

    Use as ``@pytest.mark.parametrize("check", pytest_params(suite))`` then
    ``check.run()`` (C2). pytest is imported here so the kit imports without it.
    """
    import pytest

    return [
        pytest.param(
            check,
            id=check.id,
            marks=[pytest.mark.clause(clause) for clause in check.clauses],
        )
        for check in suite.checks
    ]


def _close(store: object) -> None:
    close = getattr(store, "close", None)
    if callable(close):
        close()


@contextmanager
def using(mk: Callable[[], S]) -> Iterator[S]:
    """Yield a fresh store from ``mk`` and close it afterwards, also on failure.

    A close error after a failed body is dropped so the real failure stays visible.
    """
    store = mk()
    try:
        yield store
    except BaseException:
        with suppress(Exception):
            _close(store)
        raise
    _close(store)


Fresh: TypeAlias = Callable[[], AbstractContextManager[S]]
"""Gives a check a fresh isolated store for a ``with`` block, disposed of after."""


def each_fresh(mk: Callable[[], S]) -> Fresh[S]:
    """A plain factory of fresh stores as ``Fresh``: each store closed after its block."""
    return partial(using, mk)


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """What one concurrent call did: its value or the exception it raised."""

    value: T | None
    error: BaseException | None

    @property
    def ok(self) -> bool:
        return self.error is None


def attempt(call: Callable[[], T]) -> Outcome[T]:
    """Run ``call`` and return its outcome instead of raising."""
    try:
        return Outcome(call(), None)
    except Exception as exc:
        return Outcome(None, exc)


def run_concurrently(
    calls: Sequence[Callable[[], T]], *, timeout_s: float = THREAD_TIMEOUT_S
) -> list[Outcome[T]]:
    """Run each call on its own thread, released together by a barrier.

    Returns outcomes in the order of ``calls``. A call still running after
    ``timeout_s`` fails the check (the threads are daemons, so they cannot keep
    the process alive).
    """
    barrier = threading.Barrier(len(calls))
    outcomes: list[Outcome[T] | None] = [None] * len(calls)

    def worker(index: int, call: Callable[[], T]) -> None:
        try:
            barrier.wait(timeout_s)
            outcomes[index] = Outcome(call(), None)
        except BaseException as exc:
            outcomes[index] = Outcome(None, exc)

    threads = [
        threading.Thread(target=worker, args=(index, call), daemon=True)
        for index, call in enumerate(calls)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout_s)
    require(
        not any(thread.is_alive() for thread in threads),
        f"a concurrent call did not finish within {timeout_s:.0f} s (deadlock?)",
    )
    done = [outcome for outcome in outcomes if outcome is not None]
    require(len(done) == len(calls), "a concurrent call left no outcome")
    return done


def error_code(exc: BaseException | None) -> Any:
    """Return the ``code`` of a rulvar error (``None`` for anything else)."""
    return getattr(exc, "code", None)


def same_json(left: Any, right: Any) -> bool:
    """JSON value equality through canonical JSON (D1, C3)."""
    return stable_stringify(left) == stable_stringify(right)
