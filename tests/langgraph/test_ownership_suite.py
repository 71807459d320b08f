"""The LangGraph ownership suite passes on memory, SQLite and PostgreSQL.

Every check runs; one reported not run would fail here, since each location
offers a second handle and a clock.
"""

from __future__ import annotations

import pytest

from rulvar_conformance import Certification, ConformanceCheck, pytest_params
from rulvar_conformance.suites.langgraph_ownership import (
    langgraph_ownership_conformance,
)
from rulvar_store.backend import LocationFactory, StoreLocation


def _never_opened() -> StoreLocation:
    raise AssertionError("only the check list is read")


@pytest.mark.parametrize(
    "listed",
    pytest_params(
        langgraph_ownership_conformance(
            Certification(_never_opened, frozenset({"leases"}))
        )
    ),
)
def test_ownership_check_passes(
    listed: ConformanceCheck, locations: LocationFactory
) -> None:
    """The named ownership check (its clause in the test id's marks) holds."""
    langgraph_ownership_conformance(
        Certification(locations, frozenset({"leases"}))
    ).check(listed.id).run()
