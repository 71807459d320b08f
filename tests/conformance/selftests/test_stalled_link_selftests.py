"""C4 self-test of the stalled-link suite: a store without a client-side bound fails it.

The broken store is the real PostgreSQL store with its deadline disarmed (the
watchdog no longer cuts a connection past ``call_timeout_ms``), which is what
the store was before P13: a renew over a stalled link blocks until the link
comes back, and the check says so.
"""

from __future__ import annotations

import pytest

from rulvar_store.backend import parse_store_url, resolve_backend
from tests._postgres_gate import postgres_url
from tests.conformance.selftests._support import failure_of

SELF_TESTED: frozenset[str] = frozenset({"renew-fails-over-stalled-link"})


@pytest.mark.clause("C4")
@pytest.mark.postgres
def test_an_unbounded_renew_fails_renew_fails_over_stalled_link(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rulvar_store_postgres import _deadline

    monkeypatch.setattr(_deadline, "cut", lambda conn: None)
    url = parse_store_url(postgres_url())
    certify = resolve_backend(url).certify
    assert certify is not None
    with certify(url) as locations:
        detail = failure_of(locations, "stalled-link", "renew-fails-over-stalled-link")
    assert "still blocked" in detail
