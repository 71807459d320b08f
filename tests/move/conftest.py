"""Fixtures of the copy tests: fresh places of each backend, PostgreSQL schemas dropped."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.move._places import Place, drop_schemas, make_place


@pytest.fixture
def places(tmp_path: Path) -> Iterator[Callable[[str], Place]]:
    schemas: list[str] = []
    made: list[Place] = []
    counter = iter(range(1000))

    def make(kind: str) -> Place:
        place = make_place(kind, tmp_path, schemas, tag=str(next(counter)))
        made.append(place)
        return place

    yield make
    for place in made:
        place.pair.close()
    drop_schemas(schemas)
