"""The public modules by audience: one home per name, and the old paths warn for a release."""

from __future__ import annotations

import importlib
import warnings

import pytest

import rulvar_store
from rulvar_store import backend, ops

PUBLIC = {
    "rulvar_store": rulvar_store,
    "rulvar_store.backend": backend,
    "rulvar_store.ops": ops,
}


def test_each_name_has_one_public_home() -> None:
    homes: dict[str, list[str]] = {}
    for module_name, module in PUBLIC.items():
        for name in module.__all__:
            homes.setdefault(name, []).append(module_name)
            assert hasattr(module, name), f"{module_name}.{name} is listed but missing"
    shared = {name: where for name, where in homes.items() if len(where) > 1}
    assert shared == {}


def test_all_lists_are_sorted_constants_first() -> None:
    for module in PUBLIC.values():
        names = list(module.__all__)
        assert names == sorted(names, key=lambda name: (not name.isupper(), name))


def test_user_module_stays_small() -> None:
    # About 45 names for store users plus the asyncio API's 10 (open_store_async,
    # its opening, five protocols, the opened pair, is_async_store,
    # ForkedStoreError), a holder's LeaseLostError and LeaseKeeper pair, and
    # MissingExtraError (a store class imported without its extra); operators and
    # authors have their own modules.
    assert len(rulvar_store.__all__) <= 64


@pytest.mark.parametrize("name", sorted(rulvar_store._MOVED))
def test_a_moved_name_still_imports_from_the_old_path_with_a_warning(name: str) -> None:
    home = rulvar_store._MOVED[name]
    with pytest.warns(DeprecationWarning, match=rf"moved to {home}\.{name}"):
        value = getattr(rulvar_store, name)
    assert value is getattr(importlib.import_module(home), name)
    assert name in importlib.import_module(home).__all__
    assert name not in rulvar_store.__all__


def test_from_import_of_a_moved_name_warns() -> None:
    with pytest.warns(DeprecationWarning, match="rulvar_store.backend.hookimpl"):
        from rulvar_store import hookimpl
    assert hookimpl is backend.hookimpl


def test_user_names_import_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from rulvar_store import Lease, open_store

    assert Lease is not None
    assert callable(open_store)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = rulvar_store.no_such_name
