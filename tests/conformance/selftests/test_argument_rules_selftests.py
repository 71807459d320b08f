"""C4 self-tests of the argument-rules suite: each seeded habit fails the row it breaks.

The stores are in ``_broken_arguments``; every assertion names the case the
failure must report, so a row failing for another reason (a broken self-test)
does not pass here.
"""

from __future__ import annotations

import pytest

from rulvar_conformance import Certification, CheckNotRun, ConformanceFailure
from rulvar_conformance.suites.argument_rules import argument_rules_conformance
from rulvar_store import MemoryStore
from rulvar_store.backend import LocationFactory, parse_store_url
from tests.conformance.selftests import _broken_arguments as broken
from tests.conformance.selftests._support import FULL

SELF_TESTED: frozenset[str] = frozenset(
    {
        "args-write-run-ids",
        "args-owners",
        "args-blob-refs",
        "args-read-ids",
        "args-read-odd-ids",
        "args-records",
        "args-leases-filters-blobs",
        "args-ttl",
        "args-url-options",
        "args-last-ref",
        "args-get-under",
    }
)


def _failure(certification: Certification, check_id: str) -> str:
    suite = argument_rules_conformance(certification)
    with pytest.raises(ConformanceFailure) as caught:
        suite.check(check_id).run()
    assert caught.value.check_id == check_id
    return caught.value.detail


def _of(locations: LocationFactory) -> Certification:
    return Certification(locations, FULL)


@pytest.mark.clause("C4")
@pytest.mark.parametrize(
    ("check_id", "case"),
    [
        ("args-write-run-ids", "append(run_id=slash): expected InvalidArgumentError"),
        ("args-owners", "acquire(owner=empty): expected InvalidArgumentError"),
        ("args-blob-refs", "put(ref=empty-rest): expected InvalidArgumentError"),
        ("args-read-ids", "load(run_id=none): expected InvalidArgumentError"),
        (
            "args-leases-filters-blobs",
            "append(lease=str): expected InvalidArgumentError",
        ),
    ],
)
def test_a_store_that_repairs_bad_arguments_fails(check_id: str, case: str) -> None:
    """Escaping '/', filling empty ids, dropping a non-lease: accepted, so failed."""
    detail = _failure(_of(broken.sanitizing_locations()), check_id)
    assert f"{case} naming" in detail
    assert "observed the call succeeded" in detail


@pytest.mark.clause("C4")
def test_stringified_keys_fail_the_records_row() -> None:
    """{1: "one"} stored as {"1": "one"}: the D2 refusal is missing."""
    detail = _failure(_of(broken.locations_of(broken.KeysStringified)), "args-records")
    assert "append(entry=int-key): expected NotJsonError naming 'entry'" in detail
    assert "append(entry=set)" in detail


@pytest.mark.clause("C4")
def test_retryable_refusals_fail_the_read_ids_row() -> None:
    """A refusal dressed as an outage invites endless retries."""
    detail = _failure(
        _of(broken.locations_of(broken.RetryableRefusals)), "args-read-ids"
    )
    assert "load(run_id=none): expected InvalidArgumentError" in detail
    assert "observed StoreUnavailableError" in detail


@pytest.mark.clause("C4")
def test_untyped_odd_reads_fail_the_odd_reads_row() -> None:
    """A bare ValueError for a '/' in a read is untyped."""
    detail = _failure(
        _of(broken.locations_of(broken.UntypedOddReads)), "args-read-odd-ids"
    )
    assert "load('a/b'): ValueError" in detail


@pytest.mark.clause("C4")
def test_a_clamped_ttl_fails_the_ttl_row() -> None:
    """An opener that swaps a bad ttl for its default hides the caller's mistake."""
    detail = _failure(_of(broken.clamped_ttl_locations()), "args-ttl")
    assert "ttl_ms=negative (-5): observed it opened" in detail
    assert "ttl_ms=bool (True): observed it opened" in detail


@pytest.mark.clause("C4")
def test_ignored_url_options_fail_the_url_options_row() -> None:
    """A backend whose open never reads the URL's options accepts any typo."""
    certification = Certification(
        broken.locations_of(MemoryStore),
        FULL,
        url=parse_store_url("lax://"),
        backend=broken.LAX_OPTIONS,
    )
    detail = _failure(certification, "args-url-options")
    assert "?rulvar_no_such_option=1: observed it opened" in detail
    assert "?ttl_ms=not-a-number: observed it opened" in detail


@pytest.mark.clause("C4")
def test_an_unchecked_prefix_fails_the_last_ref_row() -> None:
    """last_ref answering a prefix outside its run (None) hides the caller's mistake."""
    locations = broken.locations_of(MemoryStore, twin=broken.UncheckedLastRef)
    detail = _failure(_of(locations), "args-last-ref")
    assert "last_ref(prefix=the run id alone): expected InvalidArgumentError" in detail
    assert "observed the call succeeded" in detail


@pytest.mark.clause("C4")
def test_an_unchecked_prefix_fails_the_get_under_row() -> None:
    """get_under answering a prefix outside its run (empty) hides the caller's mistake."""
    locations = broken.locations_of(MemoryStore, twin=broken.UncheckedGetUnder)
    detail = _failure(_of(locations), "args-get-under")
    assert "get_under(prefix=the run id alone): expected InvalidArgumentError" in detail
    assert "observed the call succeeded" in detail


def test_the_honest_memory_store_passes_every_row() -> None:
    """The same harness passes MemoryStore: the failures above are the defects'."""
    certification = Certification(
        broken.locations_of(MemoryStore),
        FULL,
        url=parse_store_url("memory://"),
        backend=None,
    )
    for check in argument_rules_conformance(certification).checks:
        check.run()


def test_url_options_not_run_without_a_url() -> None:
    """Locations not opened by URL and no URL given: not run, with the reason."""
    suite = argument_rules_conformance(_of(broken.locations_of(MemoryStore)))
    with pytest.raises(CheckNotRun, match="not opened by URL"):
        suite.check("args-url-options").run()
