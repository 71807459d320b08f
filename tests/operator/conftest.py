"""Fixtures of the operator tooling tests; they live in ``_places`` so tests can import its types."""

from tests.operator._places import byte_place, place, rulvar, url_place

__all__ = ["byte_place", "place", "rulvar", "url_place"]
