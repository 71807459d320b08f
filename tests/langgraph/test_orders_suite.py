"""The LangGraph write-orders suite passes on memory, SQLite and PostgreSQL (G15, G16, G18).

Every check runs against ``RulvarSaver`` and ``AsyncRulvarSaver``: the order
issue 39 found, seeded adversarial orders, concurrent background writes, real
graphs with ``durability="async"``, memory across holds and checkpoints, and a
stock saver's thread continued.
"""

from __future__ import annotations

import pytest

from rulvar_conformance import Certification, ConformanceCheck, pytest_params
from rulvar_conformance.suites.langgraph_orders import langgraph_orders_conformance
from rulvar_store.backend import LocationFactory, StoreLocation


def _never_opened() -> StoreLocation:
    raise AssertionError("only the check list is read")


@pytest.mark.parametrize(
    "listed",
    pytest_params(
        langgraph_orders_conformance(
            Certification(_never_opened, frozenset({"leases"}))
        )
    ),
)
def test_orders_check_passes(
    listed: ConformanceCheck, locations: LocationFactory
) -> None:
    """The named write-orders check (its clause in the test id's marks) holds."""
    langgraph_orders_conformance(Certification(locations, frozenset({"leases"}))).check(
        listed.id
    ).run()
