"""C4 self-tests of lg-lost-hold-stops-its-work (L13): two savers that lose a thread
silently fail it, the real saver passes it.

White-box: the broken savers reuse RulvarSaver's private hold bookkeeping
(``_hold_begun``, ``_held``, ``_holding``) and differ in the seeded defect only;
the suite module's ``SAVER_TYPE`` is swapped for them for the one check.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from langchain_core.runnables import RunnableConfig

from rulvar_conformance import Certification
from rulvar_conformance.harness.kit import ConformanceFailure
from rulvar_conformance.suites import langgraph_ownership
from rulvar_langgraph import RulvarSaver
from rulvar_langgraph._layout import run_for_thread
from rulvar_store import Lease, LeaseKeeper
from rulvar_store.backend import LocationFactory, parse_store_url, resolve_backend

CHECK = "lg-lost-hold-stops-its-work"
SELF_TESTED: frozenset[str] = frozenset({"lg-lost-hold-stops-its-work"})
"""The check these broken savers fail (a literal, for the meta-test)."""


class BlindHoldSaver(RulvarSaver):
    """The hold before L13: its renewals end on a refusal and nobody is told."""

    @contextmanager
    def hold(
        self, thread_id: str, config: RunnableConfig | None = None
    ) -> Iterator[RunnableConfig]:
        lease = self.journal.acquire(run_for_thread(thread_id), self.owner)  # type: ignore[attr-defined]  # a leasable store
        keeper = LeaseKeeper(self.journal.renew, lease, self._ttl_ms)  # type: ignore[attr-defined]  # a leasable store
        try:
            yield self._hold_begun(thread_id, lease, config)
        finally:
            release = self._hold_ended(lease)
            keeper.stop()
            self._run(release)


class UncheckedWritesSaver(RulvarSaver):
    """Knows the loss (ensure_owned raises) but still sends the hold's writes."""

    def _lease(self, run_id: str, config: RunnableConfig) -> Lease | None:
        return self._held(config) or self._holding.get(run_id)


def _run(locations: LocationFactory) -> None:
    langgraph_ownership.langgraph_ownership_conformance(
        Certification(locations, frozenset({"leases"}))
    ).check(CHECK).run()


@pytest.fixture
def locations() -> Iterator[LocationFactory]:
    """Fresh memory locations, as ``rulvar check memory://`` certifies."""
    parsed = parse_store_url("memory://")
    backend = resolve_backend(parsed)
    assert backend.certify is not None
    with backend.certify(parsed) as factory:
        yield factory


@pytest.mark.clause("C4")
@pytest.mark.parametrize("broken", [BlindHoldSaver, UncheckedWritesSaver])
def test_a_saver_that_loses_a_thread_silently_fails_the_check(
    broken: type[RulvarSaver],
    locations: LocationFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(langgraph_ownership, "SAVER_TYPE", broken)
    with pytest.raises(ConformanceFailure) as failed:
        _run(locations)
    assert failed.value.check_id == CHECK


@pytest.mark.clause("C4")
def test_the_real_saver_passes_the_check(locations: LocationFactory) -> None:
    """Control: the check can tell the savers apart."""
    _run(locations)
