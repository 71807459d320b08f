"""``argument_rules_conformance(certification)``: the argument rules, through the store's API.

Every backend promises the rules of the docs' "Identifiers and values" (docs/reference/data-rules.md)
(clauses D2, D9, D10-D15): an argument that breaks one raises
``InvalidArgumentError`` (``NotJsonError`` for a record that is not JSON), a
``ContractError`` that names the argument and is never retryable, and nothing is
persisted. Each row drives one rule's table of bad arguments
(``_argument_cases``) through the store's own methods on a location that holds a
run with a meta, an entry, a blob and (with leases) a live lease, and reads the
location back through the same API after every refusal. A backend may refuse
more than the rules do (the file store's safe names); it must refuse typed.

URL options are checked by opening the backend with an option it cannot take:
the location's own URL when it is opened by one (``UrlOpener``), else the URL
under certification. A store that ignores the option gets opened and closed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from rulvar_conformance.harness.certification import (
    CERTIFY_TTL_MS,
    Certification,
    SuiteSpec,
    fresh_store,
)
from rulvar_conformance.harness.kit import (
    ConformanceSuite,
    attempt,
    build_check,
    not_run,
    require,
)
from rulvar_conformance.suites._argument_cases import (
    BAD_BLOBS,
    BAD_FILTERS,
    BAD_LEASES,
    BAD_OWNERS,
    BAD_READ_REFS,
    BAD_READ_RUN_IDS,
    BAD_WRITE_REFS,
    BAD_WRITE_RUN_IDS,
    GOOD_REF,
    GOOD_RUN,
    NOT_DICT_RECORDS,
    NOT_JSON_VALUES,
)
from rulvar_store import (
    ConfigError,
    InvalidArgumentError,
    LeasableStore,
    Lease,
    NotJsonError,
    OpenedStore,
    has_batch_put,
    has_meta_lookup,
)
from rulvar_store.backend import (
    StoreUrl,
    UrlOpener,
    has_get_under,
    has_last_ref,
    parse_store_url,
)

__all__ = ["SPEC", "argument_rules_conformance"]

UNKNOWN_OPTION: Final = "rulvar_no_such_option"
SHOWN_PROBLEMS: Final = 8
"""How many refused-wrongly cases a failure lists (the count says how many more)."""


@dataclass(frozen=True)
class _Seeded:
    """One handle on a location holding ``GOOD_RUN`` (meta, entry, blob, lease)."""

    # The stores under test, typed Any: the cases hand them values of every
    # wrong type on purpose.
    journal: Any
    blobs: Any
    lease: Lease | None

    @property
    def leases(self) -> bool:
        return self.lease is not None


@dataclass(frozen=True)
class _Case:
    """``call(seeded)`` must raise ``error`` naming ``argument`` and change nothing.

    ``touches`` names what a wrongly accepted call would create: ``("run", id)``
    or ``("ref", ref)``, read back before and after.
    """

    label: str
    call: Callable[[_Seeded], object]
    argument: str
    error: type[InvalidArgumentError] = InvalidArgumentError
    touches: tuple[str, object] | None = None


@contextmanager
def _seeded(certification: Certification) -> Iterator[_Seeded]:
    # A store without leases takes no ttl (the file store refuses one).
    ttl_ms = CERTIFY_TTL_MS if "leases" in certification.capabilities else None
    with fresh_store(certification, ttl_ms) as opened:
        journal: Any = opened.journal
        lease = (
            journal.acquire(GOOD_RUN, "owner-a")
            if isinstance(journal, LeasableStore)
            else None
        )
        journal.put_meta(_meta(GOOD_RUN, "running"), lease)
        journal.append(GOOD_RUN, {"seq": 1, "kind": "step"}, lease)
        opened.transcripts.put(GOOD_REF, b"blob-0", lease)
        yield _Seeded(journal, opened.transcripts, lease)


def _meta(run_id: object, status: str = "ok", **extra: Any) -> dict[str, Any]:
    return {"runId": run_id, "status": status, "updatedAt": "t1", **extra}


def _read(call: Callable[[], object]) -> object:
    """A read's value, or the name of what it raised (reads are compared, not judged)."""
    outcome = attempt(call)
    return outcome.value if outcome.ok else type(outcome.error).__name__


def _state(seeded: _Seeded, touches: tuple[str, object] | None) -> list[object]:
    """What the location holds, read through the store's own API."""
    journal = seeded.journal
    state: list[object] = [
        _read(lambda: sorted(str(meta.get("runId")) for meta in journal.list_runs())),
        _read(partial(journal.load, GOOD_RUN)),
        _read(partial(seeded.blobs.list_refs, GOOD_RUN)),
        _read(partial(seeded.blobs.get, GOOD_REF)),
    ]
    if has_meta_lookup(journal):
        state.append(_read(partial(journal.get_meta, GOOD_RUN)))
    if touches is not None:
        kind, value = touches
        if kind == "run":
            state.append(_read(partial(journal.load, value)))
            state.append(_read(partial(seeded.blobs.list_refs, value)))
        else:
            state.append(_read(partial(seeded.blobs.get, value)))
    return state


def _refusal_problem(outcome_error: BaseException | None, case: _Case) -> str | None:
    expected = f"{case.error.__name__} naming {case.argument!r}, not retryable"
    if outcome_error is None:
        return f"expected {expected}, observed the call succeeded"
    if not isinstance(outcome_error, case.error):
        return (
            f"expected {expected}, observed {type(outcome_error).__name__}: "
            f"{outcome_error}"
        )
    if outcome_error.retryable:
        return f"expected {expected}, observed retryable=True"
    named = getattr(outcome_error, "argument", None)
    if named != case.argument:
        return f"expected {expected}, observed it names {named!r}"
    return None


def _judge(seeded: _Seeded, case: _Case) -> str | None:
    before = _state(seeded, case.touches)
    outcome = attempt(partial(case.call, seeded))
    problem = _refusal_problem(outcome.error, case)
    after = _state(seeded, case.touches)
    if problem is None and after != before:
        problem = (
            f"refused as expected, but the location changed (D14: nothing "
            f"persisted): before {before!r}, after {after!r}"
        )
    return f"{case.label}: {problem}" if problem else None


def _require_all_refused(
    certification: Certification, cases: Callable[[_Seeded], list[_Case]]
) -> None:
    with _seeded(certification) as seeded:
        listed = cases(seeded)
        problems = [p for p in (_judge(seeded, case) for case in listed) if p]
    shown = "; ".join(problems[:SHOWN_PROBLEMS])
    more = len(problems) - SHOWN_PROBLEMS
    require(
        not problems,
        f"{len(problems)} of {len(listed)} bad arguments not refused as the rules "
        f"say: {shown}" + (f" (and {more} more)" if more > 0 else ""),
    )


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# Each call takes the bad value first (bound with partial), then the handle.


def _append_to(run_id: Any, s: _Seeded) -> object:
    return s.journal.append(run_id, {"seq": 9})


def _put_meta_of(run_id: Any, s: _Seeded) -> object:
    return s.journal.put_meta(_meta(run_id))


def _acquire_run(run_id: Any, s: _Seeded) -> object:
    return s.journal.acquire(run_id, "owner-b")


def _acquire_by(owner: Any, s: _Seeded) -> object:
    return s.journal.acquire("fresh-run", owner)


def _put_blob_at(ref: Any, s: _Seeded) -> object:
    return s.blobs.put(ref, b"x")


def _blob_call(method: str, ref: Any, s: _Seeded) -> object:
    return getattr(s.blobs, method)(ref)


def _journal_call(method: str, run_id: Any, s: _Seeded) -> object:
    return getattr(s.journal, method)(run_id)


def _append_entry(make: Callable[[], object], s: _Seeded) -> object:
    return s.journal.append(GOOD_RUN, make(), s.lease)


def _put_meta_record(make: Callable[[], dict[str, Any]], s: _Seeded) -> object:
    return s.journal.put_meta({**make(), **_meta(GOOD_RUN)}, s.lease)


def _append_record(record: Any, s: _Seeded) -> object:
    return s.journal.append(GOOD_RUN, record, s.lease)


def _put_meta_as(record: Any, s: _Seeded) -> object:
    return s.journal.put_meta(record, s.lease)


def _list_runs_by(run_filter: Any, s: _Seeded) -> object:
    return s.journal.list_runs(run_filter)


def _put_blob(blob: Any, s: _Seeded) -> object:
    return s.blobs.put("good-run/other", blob)


def _put_many(items: Any, s: _Seeded, lease: Any = None) -> object:
    return s.blobs.put_many(items, lease)


def _batch_cases(seeded: _Seeded) -> list[_Case]:
    """put_many's own rules (T11): its items' shape, one run, no ref twice."""
    if not has_batch_put(seeded.blobs):
        return []
    other = "good-run/other"
    shapes: dict[str, object] = {
        "a str": "good-run/x",
        "a dict": {other: b"x"},
        "an item that is no pair": [(other,)],
        "an item of three": [(other, b"x", b"y")],
        "a ref twice": [(other, b"x"), (other, b"y")],
        "refs of two runs": [(other, b"x"), ("fresh-run/x", b"y")],
    }
    return [
        _Case(
            f"put_many(items={name})",
            partial(_put_many, items),
            "items",
            touches=("ref", other),
        )
        for name, items in shapes.items()
    ]


def _last_ref_with(run_id: Any, prefix: Any, s: _Seeded) -> object:
    return s.blobs.last_ref(run_id, prefix)


BAD_PREFIXES: Final[dict[str, object]] = {
    "none": None,
    "int": 5,
    "bytes": GOOD_RUN.encode() + b"/",
    "empty": "",
    "the run id alone": GOOD_RUN,
    "a prefix of the run id": GOOD_RUN[:4],
    "another run": "fresh-run/x",
    "a run extending it": GOOD_RUN + "-2/",
    "nul": GOOD_RUN + "/\x00",
    "lone-surrogate": GOOD_RUN + "/\udc00",
}
"""Prefixes ``last_ref`` refuses: not text any store can look up, or not under
``run_id + "/"`` (T12)."""


def _last_ref_cases(seeded: _Seeded) -> list[_Case]:
    """last_ref's rules (T12): a readable run id, a prefix under its '/'."""
    if not has_last_ref(seeded.blobs):
        not_run("the blob store offers no last_ref (an optional ability, T12)")
    prefix = GOOD_RUN + "/"
    return [
        _Case(
            f"last_ref(run_id={name})",
            partial(_last_ref_with, run_id, prefix),
            "run_id",
        )
        for name, run_id in BAD_READ_RUN_IDS.items()
    ] + [
        _Case(
            f"last_ref(prefix={name})",
            partial(_last_ref_with, GOOD_RUN, bad),
            "prefix",
        )
        for name, bad in BAD_PREFIXES.items()
    ]


def _get_under_with(run_id: Any, prefix: Any, s: _Seeded) -> object:
    return s.blobs.get_under(run_id, prefix)


def _get_under_cases(seeded: _Seeded) -> list[_Case]:
    """get_under's rules (T13): last_ref's, a readable run id and a prefix under its '/'."""
    if not has_get_under(seeded.blobs):
        not_run("the blob store offers no get_under (an optional ability, T13)")
    prefix = GOOD_RUN + "/"
    return [
        _Case(
            f"get_under(run_id={name})",
            partial(_get_under_with, run_id, prefix),
            "run_id",
        )
        for name, run_id in BAD_READ_RUN_IDS.items()
    ] + [
        _Case(
            f"get_under(prefix={name})",
            partial(_get_under_with, GOOD_RUN, bad),
            "prefix",
        )
        for name, bad in BAD_PREFIXES.items()
    ]


def _with_lease(method: str, lease: Any, s: _Seeded) -> object:
    """One fenced call presenting ``lease``."""
    if method == "append":
        return s.journal.append(GOOD_RUN, {"seq": 9}, lease)
    if method == "put_meta":
        return s.journal.put_meta(_meta(GOOD_RUN), lease)
    if method == "delete":
        return s.journal.delete(GOOD_RUN, lease)
    if method == "put":
        return s.blobs.put(GOOD_REF, b"new", lease)
    if method == "blob delete":
        return s.blobs.delete(GOOD_REF, lease)
    if method == "put_many":
        return s.blobs.put_many([(GOOD_REF, b"new")], lease)
    return getattr(s.journal, method)(lease)  # renew, release


def _write_run_id_cases(seeded: _Seeded) -> list[_Case]:
    cases: list[_Case] = []
    for name, run_id in BAD_WRITE_RUN_IDS.items():
        touches = ("run", run_id) if isinstance(run_id, str) else None
        cases.append(
            _Case(
                f"append(run_id={name})",
                partial(_append_to, run_id),
                "run_id",
                touches=touches,
            )
        )
        cases.append(
            _Case(
                f"put_meta(runId={name})",
                partial(_put_meta_of, run_id),
                "meta['runId']",
                touches=touches,
            )
        )
        if seeded.leases:
            cases.append(
                _Case(
                    f"acquire(run_id={name})",
                    partial(_acquire_run, run_id),
                    "run_id",
                    touches=touches,
                )
            )
    return cases


def _owner_cases(seeded: _Seeded) -> list[_Case]:
    if not seeded.leases:
        not_run("the store has no leases, so no owners")
    return [
        _Case(f"acquire(owner={name})", partial(_acquire_by, owner), "owner")
        for name, owner in BAD_OWNERS.items()
    ]


def _ref_cases(seeded: _Seeded) -> list[_Case]:
    cases = [
        _Case(
            f"put(ref={name})",
            partial(_put_blob_at, ref),
            "ref",
            touches=("ref", ref) if isinstance(ref, str) else None,
        )
        for name, ref in BAD_WRITE_REFS.items()
    ]
    if has_batch_put(seeded.blobs):
        cases += [
            _Case(
                f"put_many(ref={name})",
                partial(_put_many, [(ref, b"x")]),
                "ref",
                touches=("ref", ref) if isinstance(ref, str) else None,
            )
            for name, ref in BAD_WRITE_REFS.items()
        ]
    for name, ref in BAD_READ_REFS.items():
        for method in ("get", "delete"):
            cases.append(
                _Case(f"{method}(ref={name})", partial(_blob_call, method, ref), "ref")
            )
    return cases


def _read_id_cases(seeded: _Seeded) -> list[_Case]:
    methods = ["load", "delete"]
    if has_meta_lookup(seeded.journal):
        methods.append("get_meta")
    cases: list[_Case] = []
    for name, run_id in BAD_READ_RUN_IDS.items():
        cases += [
            _Case(
                f"{method}(run_id={name})",
                partial(_journal_call, method, run_id),
                "run_id",
            )
            for method in methods
        ]
        cases.append(
            _Case(
                f"list_refs(run_id={name})",
                partial(_blob_call, "list_refs", run_id),
                "run_id",
            )
        )
    return cases


def _record_cases(seeded: _Seeded) -> list[_Case]:
    cases: list[_Case] = []
    for name, make in NOT_JSON_VALUES.items():
        cases.append(
            _Case(
                f"append(entry={name})",
                partial(_append_entry, make),
                "entry",
                NotJsonError,
            )
        )
        cases.append(
            _Case(
                f"put_meta(meta={name})",
                partial(_put_meta_record, make),
                "meta",
                NotJsonError,
            )
        )
    for name, record in NOT_DICT_RECORDS.items():
        cases.append(
            _Case(f"append(entry={name})", partial(_append_record, record), "entry")
        )
        cases.append(
            _Case(f"put_meta(meta={name})", partial(_put_meta_as, record), "meta")
        )
    cases.append(
        _Case(
            "put_meta(meta without runId)",
            partial(_put_meta_as, {"status": "ok"}),
            "meta",
        )
    )
    return cases


def _lease_filter_blob_cases(seeded: _Seeded) -> list[_Case]:
    methods = ["append", "put_meta", "delete", "put", "blob delete"]
    if has_batch_put(seeded.blobs):
        methods.append("put_many")
    cases: list[_Case] = _batch_cases(seeded)
    if seeded.leases:
        methods += ["renew", "release"]
        cases += [
            _Case(f"{method}(None)", partial(_with_lease, method, None), "lease")
            for method in ("renew", "release")
        ]
    for name, (lease, argument) in BAD_LEASES.items():
        cases += [
            _Case(
                f"{method}(lease={name})", partial(_with_lease, method, lease), argument
            )
            for method in methods
        ]
    cases += [
        _Case(f"list_runs({name})", partial(_list_runs_by, run_filter), argument)
        for name, (run_filter, argument) in BAD_FILTERS.items()
    ]
    cases += [
        _Case(
            f"put(blob={name})",
            partial(_put_blob, blob),
            "blob",
            touches=("ref", "good-run/other"),
        )
        for name, blob in BAD_BLOBS.items()
    ]
    if has_batch_put(seeded.blobs):
        cases += [
            _Case(
                f"put_many(blob={name})",
                partial(_put_many, [("good-run/other", blob)]),
                "blob",
                touches=("ref", "good-run/other"),
            )
            for name, blob in BAD_BLOBS.items()
        ]
    return cases


BAD_TTLS: Final[dict[str, object]] = {
    "zero": 0,
    "negative": -5,
    "bool": True,
    "past-int32": 2**31,
    "float": 1.5,
}
"""ttls no store may open with. Text is left out: keyword options merge with the
URL's query string, where ``"60000"`` is how a ttl is written."""


def _ttl_refused(certification: Certification) -> None:
    if "leases" not in certification.capabilities:
        not_run("the store has no leases, so no ttl")
    problems: list[str] = []
    for name, ttl in BAD_TTLS.items():
        location = certification.locations()
        try:
            outcome = attempt(partial(location.open, ttl))  # type: ignore[arg-type]  # the point
            if outcome.ok and isinstance(outcome.value, OpenedStore):
                outcome.value.close()
        finally:
            location.remove()
        error = outcome.error
        if not isinstance(error, ConfigError) or error.retryable:
            seen = "it opened" if error is None else f"{type(error).__name__}: {error}"
            problems.append(f"ttl_ms={name} ({ttl!r}): observed {seen}")
    require(
        not problems,
        f"expected ConfigError (not retryable) for each ttl_ms outside 1..2^31-1 or "
        f"not an int (D9); {'; '.join(problems)}",
    )


def _url_under_test(certification: Certification) -> StoreUrl:
    location = certification.locations()
    try:
        if isinstance(location.opener, UrlOpener):
            return parse_store_url(location.opener.url)
    finally:
        location.remove()
    if certification.url is None:
        not_run(
            "the locations are not opened by URL and no URL is under certification "
            "(rulvar check URL and pytest --rulvar-store=URL give one)"
        )
    assert certification.url is not None
    return certification.url


def _with_option(url: StoreUrl, name: str, value: str) -> StoreUrl:
    joiner = "&" if url.parts.query else "?"
    return parse_store_url(f"{url.raw}{joiner}{name}={value}")


def _url_options_refused(certification: Certification) -> None:
    url = _url_under_test(certification)
    backend = certification.backend
    if backend is None:
        from rulvar_store.backend import resolve_backend

        backend = resolve_backend(url)
    bad = {UNKNOWN_OPTION: "1"}
    if "leases" in certification.capabilities:
        bad["ttl_ms"] = "not-a-number"
    problems: list[str] = []
    for name, value in bad.items():
        outcome = attempt(partial(backend.open, _with_option(url, name, value)))
        if outcome.ok and isinstance(outcome.value, OpenedStore):
            outcome.value.close()
        error = outcome.error
        if not isinstance(error, ConfigError) or error.retryable:
            seen = "it opened" if error is None else f"{type(error).__name__}: {error}"
            problems.append(f"?{name}={value}: observed {seen}")
        elif name not in str(error):
            problems.append(
                f"?{name}={value}: the ConfigError does not name it: {error}"
            )
    require(
        not problems,
        f"expected a ConfigError naming the option, not retryable (D15); "
        f"{'; '.join(problems)}",
    )


def _typed_either_way(certification: Certification) -> None:
    """Reads of ids the write rule refuses: answered, or refused typed (D12)."""
    with _seeded(certification) as seeded:
        journal = seeded.journal
        problems: list[str] = []
        for run_id in ("a/b", "", "r" * 300):
            calls: dict[str, Callable[[], object]] = {
                "load": partial(journal.load, run_id),
                "delete": partial(journal.delete, run_id),
                "list_refs": partial(seeded.blobs.list_refs, run_id),
            }
            if has_meta_lookup(journal):
                calls["get_meta"] = partial(journal.get_meta, run_id)
            for method, call in calls.items():
                error = attempt(call).error
                if error is None:
                    continue
                if not isinstance(error, InvalidArgumentError) or error.retryable:
                    problems.append(
                        f"{method}({_shown(run_id)}): {type(error).__name__}: {error}"
                    )
        require(
            not problems,
            "expected reads and removals of ids only the write rule refuses to "
            "answer, or to refuse with InvalidArgumentError; observed "
            + "; ".join(problems),
        )


def argument_rules_conformance(certification: Certification) -> ConformanceSuite:
    """Build the argument-rules suite over the certification's fresh locations."""
    rows: list[tuple[str, str, tuple[str, ...], Callable[[], None]]] = [
        ("args-write-run-ids", "run ids a write would create state under are refused",
         ("D10", "D14"), partial(_require_all_refused, certification, _write_run_id_cases)),
        ("args-owners", "owners break the run-id rule ('/' allowed): refused",
         ("D10", "D14"), partial(_require_all_refused, certification, _owner_cases)),
        ("args-blob-refs", "blob refs outside <runId>[/<rest>] are refused",
         ("D11", "D14"), partial(_require_all_refused, certification, _ref_cases)),
        ("args-read-ids", "reads refuse only ids no store can hold (NUL, surrogates)",
         ("D12", "D14"), partial(_require_all_refused, certification, _read_id_cases)),
        ("args-read-odd-ids", "reads of ids only writes refuse: answered or typed",
         ("D12",), partial(_typed_either_way, certification)),
        ("args-records", "entries and metas that are not JSON dicts are refused",
         ("D2", "D13", "D14"), partial(_require_all_refused, certification, _record_cases)),
        ("args-leases-filters-blobs", "a presented lease, filter or blob of the wrong shape",
         ("D14", "T11"), partial(_require_all_refused, certification, _lease_filter_blob_cases)),
        ("args-last-ref", "last_ref's run id and prefix of the wrong shape are refused",
         ("T12", "D12", "D14"), partial(_require_all_refused, certification, _last_ref_cases)),
        ("args-get-under", "get_under's run id and prefix of the wrong shape are refused",
         ("T13", "D12", "D14"), partial(_require_all_refused, certification, _get_under_cases)),
        ("args-ttl", "ttl_ms outside 1..2^31-1 or not an int is a ConfigError",
         ("D9",), partial(_ttl_refused, certification)),
        ("args-url-options", "an unknown or mistyped URL option is a ConfigError",
         ("D15",), partial(_url_options_refused, certification)),
    ]  # fmt: skip
    return ConformanceSuite(
        "argument-rules",
        tuple(
            build_check(check_id, title, clauses, body)
            for check_id, title, clauses, body in rows
        ),
    )


SPEC: Final = SuiteSpec(
    "argument-rules",
    argument_rules_conformance,
    None,
    True,
    "identifiers, values, ttl and URL options: typed, permanent, nothing persisted",
)
