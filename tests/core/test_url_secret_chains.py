"""No part of a URL's password rides along on a ConfigError's cause or context.

Issue 38, item 6: a password holding a raw '#', '/' or '?' makes the URL's port
unreadable. The ConfigError's own message masked it, but its chained cause (the
parser's ``ValueError: Port could not be cast to integer value as 'Pw'``) kept
the part of the password before that character, and ``logger.exception`` or any
traceback prints the chain. Nothing connects: the URL is refused at
construction, so no server is needed (P11).
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Iterator

import pytest

from rulvar_store import ConfigError, open_store
from rulvar_store_postgres import AsyncPostgresStore, PostgresStore

FIRST, REST = "Hush7Part", "Tail9Part"  # the pieces a parser splits the password into


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending += [current.__cause__, current.__context__]


OPENERS: dict[str, Callable[[str], object]] = {
    "PostgresStore": PostgresStore,
    "AsyncPostgresStore": AsyncPostgresStore,
    "open_store": open_store,
}


@pytest.mark.clause("P11")
@pytest.mark.parametrize("raw", ["#", "/", "?"])
@pytest.mark.parametrize("opener", sorted(OPENERS))
def test_p11_a_raw_character_in_the_password_leaves_no_piece_in_the_chain(
    raw: str, opener: str, caplog: pytest.LogCaptureFixture
) -> None:
    """P11: the error, every exception chained to it and a logged traceback are clean."""
    url = f"postgresql://app:{FIRST}{raw}{REST}@db.invalid:5432/runs"
    with pytest.raises(ConfigError) as caught:
        OPENERS[opener](url)
    error = caught.value
    assert "percent-encode" in str(error)
    texts = [repr(linked) for linked in _chain(error)]
    texts.append("".join(traceback.format_exception(error)))
    with caplog.at_level(logging.ERROR):
        logging.getLogger("app").error("open failed", exc_info=error)
    texts.append(caplog.text)
    for text in texts:
        assert FIRST not in text, text
        assert REST not in text, text
    assert error.__cause__ is None
    assert error.__context__ is None


@pytest.mark.clause("P11")
def test_p11_libpq_quoting_the_password_is_masked_and_not_chained() -> None:
    """P11: libpq's refusal quotes a bad password token; only the masked text stays.

    (``invalid percent-encoded token: "<the password>"``: the message masked
    it, the chained psycopg error kept it.)
    """
    url = f"postgresql://app@db.invalid:5432/runs?password={FIRST}%ZZ"
    with pytest.raises(ConfigError) as caught:
        PostgresStore(url)
    assert "percent-encoded token" in str(caught.value)
    for linked in _chain(caught.value):
        assert FIRST not in repr(linked), repr(linked)
    assert FIRST not in "".join(traceback.format_exception(caught.value))
