"""Split a PostgreSQL URL or ``key=value`` string the way libpq reads it (P1, P16).

Python's ``urlsplit`` is not libpq's parser: it reads ``h1:p1,h2:p2`` as one
host with a port that is not an integer, turns ``postgresql:///db`` into
``postgresql:/db``, and ends a URL at a ``#`` that libpq keeps. So the URL is
cut here by libpq's own rules (credentials up to the ``@``, then the host list
up to ``/`` or ``?``, the database name up to ``?``, then the query) and the
text libpq receives is the URL itself with only the store's options taken out
of the query. Every spelling libpq accepts passes: several hosts with or
without ports, no host at all, Unix-socket directories (percent-encoded in the
host or as ``?host=``), ``?host=&port=`` lists, and ``key=value`` strings.

A raw ``@``, ``/``, ``?`` or ``#`` in the credentials is refused, never
guessed: libpq and other URL parsers disagree on where such credentials end,
and the part they misplace (a piece of the password) becomes a host or port
that error messages quote. The refusal quotes nothing of the URL and chains
no parser error (a parser's text is what would quote the password).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

from rulvar_store.backend import redact_url
from rulvar_store.errors import ConfigError

__all__ = ["RAW_CHARACTER_HINT", "Split", "split_keywords", "split_url"]

RAW_CHARACTER_HINT: Final = (
    "a raw '@', '/', '?' or '#' in the user name or password ends the part libpq "
    "reads as credentials; percent-encode them ('@' as %40, '/' as %2F, '?' as "
    "%3F, '#' as %23)"
)
# libpq's key=value syntax: a value is quoted ('...', with \' and \\) or bare.
_KEYWORD: Final = re.compile(r"(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)")


@dataclass(frozen=True, slots=True)
class Split:
    """A connection string cut into what libpq gets and what the store keeps."""

    conninfo: str  # for libpq: the store's own options removed
    options: dict[str, str]  # the store's own options found in the query
    where: str  # the target for messages: hosts, port, database, user; no password
    secrets: tuple[str, ...]  # password texts to mask if a driver echoes them


def _credentials_end(rest: str) -> int:
    """Index of the ``@`` that ends the credentials in ``rest`` (after ``://``), or -1.

    The LAST ``@`` before the first ``/``, ``?`` or ``#`` that follows the first
    ``@``: a host never holds any of them, so a raw one in a password shows as
    credentials that hold it (and are refused). An ``@`` only inside the query
    string (after ``?`` and a ``key=``) ends no credentials.
    """
    first_at = rest.find("@")
    if first_at < 0:
        return -1
    question = rest.find("?")
    if 0 <= question < first_at and "=" in rest[question:first_at]:
        return -1
    after = re.search(r"[/?#]", rest[first_at:])
    stop = first_at + after.start() if after else len(rest)
    return rest.rindex("@", 0, stop)


def split_url(url: str, option_names: frozenset[str]) -> Split:
    """Cut a ``postgresql://`` URL (see the module text).

    Raises:
        ConfigError: raw reserved characters in the credentials, or one of the
            store's options given twice.
    """
    scheme, _, rest = url.partition("://")
    at = _credentials_end(rest)
    userinfo, rest = (rest[:at], rest[at + 1 :]) if at >= 0 else ("", rest)
    if any(c in userinfo for c in "@/?#"):
        raise ConfigError(
            f"malformed PostgreSQL URL {redact_url(url)!r}: {RAW_CHARACTER_HINT}"
        )
    user, _, password = userinfo.partition(":")
    before_query, _, query = rest.partition("?")
    hosts, slash, path = before_query.partition("/")
    if "#" in before_query or "@" in before_query:
        # Cut here, libpq would read a host or a database name holding them.
        raise ConfigError(
            f"malformed PostgreSQL URL {redact_url(url)!r}: {RAW_CHARACTER_HINT}"
        )
    ours: dict[str, str] = {}
    kept: list[str] = []
    secrets: list[str] = []
    shown: list[str] = []
    # libpq percent-decodes query values and keeps '+' literal, so the pieces it
    # gets are passed through verbatim (never re-encoded); only ours are decoded.
    for piece in query.split("&") if query else ():
        if not piece:
            continue
        raw_key, _, raw_value = piece.partition("=")
        key, value = unquote(raw_key), unquote(raw_value)
        if key in option_names:
            if key in ours:
                raise ConfigError(f"store URL option {key!r} is given twice")
            ours[key] = value
            continue
        if key == "password":
            secrets.extend({value, raw_value})
        elif key in ("host", "hostaddr", "port", "dbname", "user"):
            shown.append(f"{key}={value}")
        kept.append(piece)
    if password:
        secrets.extend({password, unquote(password)})
    conninfo = f"{scheme}://{userinfo + '@' if userinfo else ''}{before_query}"
    if kept:
        conninfo += "?" + "&".join(kept)
    where = f"{scheme}://{unquote(user) + '@' if user else ''}{unquote(hosts)}"
    where += f"{slash}{unquote(path)}"
    if shown:
        where += "?" + "&".join(shown)
    return Split(conninfo, ours, where, tuple(secrets))


def split_keywords(conninfo: str) -> Split:
    """Describe a libpq ``key=value`` string without its password."""
    fields = {key: value.strip("'") for key, value in _KEYWORD.findall(conninfo)}
    shown = " ".join(
        f"{key}={fields[key]}"
        for key in ("host", "hostaddr", "port", "dbname", "user")
        if key in fields
    )
    secret = fields.get("password")
    return Split(
        conninfo,
        {},
        f"libpq conninfo ({shown or 'defaults'})",
        (secret,) if secret else (),
    )
