"""Each check in a process of its own, so a store that crashes the process fails one row.

``rulvar check --isolate`` runs every check this way. The child
(``python -m rulvar_conformance.harness.isolation``) opens the URL's backend
itself, enters its ``certify``, builds the same suites as the parent (the same
selection, the asyncio path or not), runs the one check it is given and prints
its ``CheckResult`` as one JSON line. A child killed by a signal (a segfault in
a driver, ``close()`` racing a call) becomes a failed row naming the signal,
with the Python stack ``faulthandler`` printed as it died.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from typing import Any, Final

from rulvar_conformance.harness.certification import by_url
from rulvar_conformance.harness.certify import (
    CheckResult,
    certification_suites,
    run_suites,
)
from rulvar_conformance.harness.deadline import RunBudget, RunSpent
from rulvar_conformance.harness.kit import ConformanceSuite
from rulvar_conformance.harness.processes import PIPE, Finished, finish, start_module

__all__ = ["ISOLATION_ENV", "run_isolated"]

ISOLATION_ENV: Final = "RULVAR_ISOLATED_CHECK"
_RESULT: Final = "rulvar-isolated-result "
_GRACE_S: Final = 60.0
"""Time for the child's start and its certify() beyond the check's own deadline."""


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _verdict(done: Finished, timeout_s: float) -> str | None:
    """The JSON line of the child's result, or why there is none."""
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(_RESULT):
            return None
    tail = done.stderr.strip() or "(no stderr)"
    if done.timed_out:
        return (
            f"its process did not end within {timeout_s + _GRACE_S:g} s and was killed"
        )
    code = done.returncode
    if code is not None and code < 0:
        return (
            f"its process died by {_signal_name(code)} (exit {code}) while the check "
            f"ran: the store crashed the process; its last words:\n{tail}"
        )
    return f"its process exited {code} without a result: {tail}"


def _result_of(done: Finished) -> CheckResult:
    line = next(
        line for line in reversed(done.stdout.splitlines()) if line.startswith(_RESULT)
    )
    row: dict[str, Any] = json.loads(line.removeprefix(_RESULT))
    row["clauses"] = tuple(row["clauses"])
    return CheckResult(**row)


def run_isolated(
    url: str,
    suites: Sequence[ConformanceSuite],
    *,
    selection: Sequence[str] | None,
    async_path: bool,
    check_timeout_s: float,
    on_start: Callable[[str, str], None] | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
    budget: RunBudget | None = None,
) -> list[CheckResult]:
    """Run every check of ``suites`` in its own child process, in order.

    ``selection`` and ``async_path`` are what built ``suites``: the child builds
    them again from ``url`` and runs the one check named. ``budget`` bounds the
    run as a whole (K10), as ``run_suites`` does.
    """
    if budget is None:
        budget = RunBudget(check_timeout_s)
    results: list[CheckResult] = []
    for suite in suites:
        for check in suite.checks:
            if on_start is not None:
                on_start(suite.name, check.id)
            try:
                check_timeout_s = budget.deadline_for(check.id)
            except RunSpent as spent:
                result = CheckResult(
                    suite=suite.name,
                    check_id=check.id,
                    status="failed",
                    duration_ms=0.0,
                    error=str(spent),
                    title=check.title,
                    clauses=check.clauses,
                )
                results.append(result)
                if on_result is not None:
                    on_result(result)
                continue
            config = {
                "url": url,
                "selection": None if selection is None else list(selection),
                "async": async_path,
                "suite": suite.name,
                "check": check.id,
                "timeout_s": check_timeout_s,
            }
            done = finish(
                start_module(
                    __name__, env={ISOLATION_ENV: json.dumps(config)}, stdout=PIPE
                ),
                check_timeout_s + _GRACE_S,
            )
            why = _verdict(done, check_timeout_s)
            result = (
                _result_of(done)
                if why is None
                else CheckResult(
                    suite=suite.name,
                    check_id=check.id,
                    status="failed",
                    duration_ms=0.0,
                    error=f"store-conformance {check.id}: {why}",
                    title=check.title,
                    clauses=check.clauses,
                )
            )
            if done.timed_out or ": did not finish in " in (result.error or ""):
                budget.hung += 1  # later checks get the short deadline
            results.append(result)
            if on_result is not None:
                on_result(result)
    return results


def _child(config: dict[str, Any]) -> int:
    """Run one check the parent named; print its result as one line."""
    from rulvar_store.backend import parse_store_url, resolve_backend

    faulthandler.enable()  # a fatal signal prints the stack the parent shows
    parsed = parse_store_url(config["url"])
    backend = resolve_backend(parsed)
    assert backend.certify is not None  # the parent certified it already
    selection = config["selection"]
    with backend.certify(parsed) as locations:
        certification = by_url(locations, parsed, backend)
        suites = certification_suites(certification, selection)
        if config["async"]:
            from rulvar_conformance.harness.async_certify import async_suites

            suites += async_suites(certification, selection)
        (suite,) = [suite for suite in suites if suite.name == config["suite"]]
        one = replace(suite, checks=(suite.check(config["check"]),))
        (result,) = run_suites([one], check_timeout_s=config["timeout_s"])
    sys.stdout.write(_RESULT + json.dumps(asdict(result)) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    code = _child(json.loads(os.environ[ISOLATION_ENV]))
    sys.stdout.flush()
    # A timed-out check may leave threads no interpreter shutdown would wait out.
    os._exit(code)
