"""Store URLs: parsing, typed options and redaction of credentials."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import SplitResult, parse_qsl, urlsplit

from rulvar_store.errors import ConfigError

__all__ = ["StoreUrl", "option_bool", "option_int", "parse_store_url", "redact_url"]

# A decimal integer as a URL writes it: ASCII digits only, no sign but '-', no
# spaces or underscores. (``re``'s ``\d`` would match other scripts' digits.)
_DECIMAL: Final = re.compile(r"-?[0-9]+")

# A libpq ``key=value`` connection string ("host=db1 dbname=runs"): no scheme,
# so it is told apart by its first ``key=``; libpq's is the only format of the kind.
_KEYWORD_STRING: Final = re.compile(r"\s*[A-Za-z_]\w*\s*=")
_KEYWORD_PASSWORD: Final = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")
KEYWORD_SCHEME: Final = "postgresql"
"""The scheme a ``key=value`` string opens with (the PostgreSQL backend's)."""

_MALFORMED_HINT = (
    "its host or port cannot be read; a user name or password holding '@', ':', "
    "'/', '?' or '#' must be percent-encoded ('@' as %40, '/' as %2F, '?' as %3F, "
    "'#' as %23)"
)
"""Why a URL did not parse, in words that quote none of it."""


@dataclass(frozen=True, slots=True)
class StoreUrl:
    """A parsed store URL; ``options`` merges the query string with keyword options."""

    raw: str
    scheme: str
    parts: SplitResult
    options: Mapping[str, Any]

    @property
    def redacted(self) -> str:
        """The URL with any password replaced, safe for errors and output."""
        return redact_url(self.raw)


def redact_url(url: str) -> str:
    """Return ``url`` with its password (if any) replaced by ``***``.

    Works on the raw text, never on parsed ports or hosts, so it cannot fail on
    a URL that is malformed in other ways: redaction runs while reporting such
    mistakes. A password may hold a raw ``/``, ``?``, ``#`` or ``@`` (it should
    be percent-encoded, but people paste them), which moves where a parser ends
    the authority; so the user information is taken to end at the LAST ``@``
    before the first ``/``, ``?`` or ``#`` that follows the first ``@`` (a host
    never holds any of them). In the rare URL with an ``@`` in its path or query
    as well, more is hidden than needed, never less.
    """
    if "://" not in url and _KEYWORD_STRING.match(url):
        return _KEYWORD_PASSWORD.sub(r"\1***", url)
    changed = False
    head, sep, rest = url.partition("://")
    if sep and "@" in rest:
        first_at = rest.index("@")
        after = re.search(r"[/?#]", rest[first_at:])
        stop = first_at + after.start() if after else len(rest)
        at = rest.rindex("@", 0, stop)
        userinfo = rest[:at]
        if ":" in userinfo:
            user = userinfo.split(":", 1)[0]
            rest = f"{user}:***@{rest[at + 1 :]}"
            changed = True
    before, question, query = rest.partition("?")
    pieces = query.split("&")
    if any(piece.partition("=")[0] == "password" for piece in pieces):
        # libpq also takes the password as a query parameter.
        query = "&".join(
            "password=***" if piece.partition("=")[0] == "password" else piece
            for piece in pieces
        )
        rest = f"{before}{question}{query}"
        changed = True
    return f"{head}{sep}{rest}" if changed else url


def parse_store_url(url: object, options: Mapping[str, Any] | None = None) -> StoreUrl:
    """Split ``url`` into scheme, parts and options (keyword options win).

    Raises:
        ConfigError: not a string, no ``scheme://``, or a repeated query option.
            A libpq ``key=value`` string ("host=db1 dbname=runs") is taken as
            it is, with the PostgreSQL backend's scheme.
    """
    if not isinstance(url, str) or not url:
        raise ConfigError("a store URL must be a non-empty string, e.g. 'memory://'")
    if "://" not in url and _KEYWORD_STRING.match(url):
        # libpq's key=value form: the options are keywords only (no query).
        return StoreUrl(
            raw=url,
            scheme=KEYWORD_SCHEME,
            parts=urlsplit(""),
            options=dict(options or {}),
        )
    try:
        parts = urlsplit(url)
    except ValueError:
        # Not chained: the parser's own text can quote a piece of a password.
        raise ConfigError(
            f"malformed store URL {redact_url(url)!r}: {_MALFORMED_HINT}"
        ) from None
    if not parts.scheme or "://" not in url:
        raise ConfigError(
            f"malformed store URL {redact_url(url)!r}: expected 'scheme://...', "
            "e.g. 'sqlite:///runs.db' or 'memory://'"
        )
    merged: dict[str, Any] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in merged:
            raise ConfigError(f"store URL option {key!r} is given twice")
        merged[key] = value
    merged.update(options or {})
    return StoreUrl(raw=url, scheme=parts.scheme.lower(), parts=parts, options=merged)


def option_int(options: Mapping[str, Any], name: str, default: int) -> int:
    """Read an integer option given as an int or a string of ASCII digits.

    The one integer parser of every backend's URL options. ``int()`` alone
    would also take ``" 5"``, ``"+5"``, ``"5_000"`` and other scripts' digits
    (fullwidth ``"12"``): a URL that a reader cannot read the same way is refused. An
    optional leading ``-`` is kept so a negative value gets its range error.

    Raises:
        ConfigError: the value is neither.
    """
    value = options.get(name, default)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _DECIMAL.fullmatch(value):
        return int(value, 10)
    raise ConfigError(
        f"option {name} must be an integer in ASCII digits, got {value!r}"
    )


def option_bool(options: Mapping[str, Any], name: str, default: bool) -> bool:
    """Read a boolean option given as a bool or one of true/false/1/0/yes/no.

    Raises:
        ConfigError: any other value.
    """
    value = options.get(name, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on"):
        return True
    if isinstance(value, str) and value.lower() in ("false", "0", "no", "off"):
        return False
    raise ConfigError(f"option {name} must be true or false, got {value!r}")
