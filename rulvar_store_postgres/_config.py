"""Intake of a PostgresStore's URL and options (P1), before any connection.

Options come from keyword arguments or from the URL's query string
(``postgresql://host/db?schema=tenant_a&ttl_ms=30000``); a keyword wins. Our
options are stripped from the query before the rest goes to libpq, so libpq
parameters (``sslmode``, ``application_name``, ...) keep working. This module
imports no driver at import time (the plugin imports it); libpq's parser is
consulted only when settings are resolved, i.e. when a store is built.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import unquote, urlsplit, urlunsplit

from rulvar_store import DEFAULT_LEASE_TTL_MS
from rulvar_store.backend import option_bool, option_int, redact_url, validate_ttl_ms
from rulvar_store.errors import ConfigError
from rulvar_store_postgres._log_mask import masked

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_POOL_MAX_SIZE",
    "OPTION_NAMES",
    "SCHEMES",
    "Settings",
    "default_call_timeout_ms",
    "default_idle_in_transaction_timeout_ms",
    "default_lock_timeout_ms",
    "resolve_settings",
]

SCHEMES: Final = ("postgresql", "postgres")
DEFAULT_POOL_MAX_SIZE: Final = 10
DEFAULT_CONNECT_TIMEOUT_S: Final = 5
_SCHEMA_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# PostgreSQL truncates identifiers beyond 63 bytes; a truncated schema name
# would silently alias another store's schema.
_MAX_SCHEMA_LENGTH: Final = 63
# A ttl at which both derived timeouts reach their caps.
_MAX_DERIVED_TTL_MS: Final = 40_000
OPTION_NAMES: Final = frozenset(
    {
        "schema",
        "ttl_ms",
        "pool_max_size",
        "max_size",
        "lock_timeout_ms",
        "idle_in_transaction_timeout_ms",
        "connect_timeout_s",
        "call_timeout_ms",
        "readonly",
        "prepared_statements",
    }
)


_RAW_CHARACTER_HINT: Final = (
    "a raw '@', '/', '?' or '#' in the user name or password ends the part libpq "
    "reads as credentials; percent-encode them ('@' as %40, '/' as %2F, '?' as "
    "%3F, '#' as %23)"
)


def default_lock_timeout_ms(ttl_ms: int) -> int:
    """Lock waits default to a quarter of the ttl, at most 5 s (at least 1 ms)."""
    return max(1, min(ttl_ms // 4, 5_000))


def default_call_timeout_ms(ttl_ms: int, lock_timeout_ms: int) -> int:
    """Half the ttl, at most 10 s, and at least a lock wait plus one second.

    Below the ttl for the usual settings, so a holder whose link stalls sees its
    renew fail before its lease expires (L10); never cutting a lock wait short.
    """
    return max(min(ttl_ms // 2, 10_000), lock_timeout_ms + 1_000)


def default_idle_in_transaction_timeout_ms(ttl_ms: int) -> int:
    """Half the ttl, at most 10 s: a paused holder is cut off before its lease ends."""
    return max(1, min(ttl_ms // 2, 10_000))


@dataclass(frozen=True, slots=True)
class Settings:
    """Validated options of one store; ``conninfo`` is what libpq receives."""

    conninfo: str
    schema: str
    ttl_ms: int
    pool_max_size: int
    lock_timeout_ms: int
    idle_in_transaction_timeout_ms: int
    connect_timeout_s: int
    call_timeout_ms: int  # the client-side bound of each statement (P13)
    where: str  # the target for messages: no password, ever
    secrets: tuple[str, ...]  # texts to mask if a driver message echoes them
    readonly: bool = False  # observers: no boot DDL, sessions read-only
    # Server-side prepared statements (off for a pooler that does not keep them).
    prepared_statements: bool = True


def _unreadable_part(exc: ValueError) -> str:
    """Name the part of the URL the parser refused, without quoting any of it."""
    text = str(exc)
    if "out of range" in text:
        return "its port is out of range (0-65535)"
    if "Port" in text:
        return "its port is not an integer"
    return "its host or port cannot be read"


def _positive(options: Mapping[str, Any], name: str, default: int) -> int:
    value = option_int(options, name, default)
    if value < 1:
        raise ConfigError(f"option {name} must be a positive integer, got {value}")
    return value


def _split_url(url: str) -> tuple[str, dict[str, str], str, tuple[str, ...]]:
    """Return (conninfo without our options, our query options, where, secrets)."""
    try:
        parts = urlsplit(url)
        password = parts.password
        user = parts.username
        host = parts.hostname or ""
        port = parts.port
    except ValueError as exc:
        unreadable: str | None = _unreadable_part(exc)
    else:
        unreadable = None
    if unreadable is not None:
        # The parser's text may quote a piece of the password: never shown, only
        # which part failed, in our words; raised outside the handler, so neither
        # the cause nor the context (any traceback or logger.exception) carries it.
        raise ConfigError(
            f"malformed PostgreSQL URL {redact_url(url)!r}: {unreadable}; "
            f"{_RAW_CHARACTER_HINT}"
        )
    userinfo = parts.netloc.rpartition("@")[0]
    if "@" in userinfo or parts.fragment:
        # libpq ends the user information at the FIRST '@' (and the URL at a
        # '#'), so the rest of the password would become the host name, shown
        # in its errors and in the pool's log lines. Refused before libpq sees it.
        raise ConfigError(
            f"malformed PostgreSQL URL {redact_url(url)!r}: {_RAW_CHARACTER_HINT}"
        )
    ours: dict[str, str] = {}
    rest: list[str] = []
    secrets: list[str] = []
    # libpq percent-decodes query values and keeps '+' literal, so the pieces it
    # gets are passed through verbatim (never re-encoded); only ours are decoded.
    for piece in parts.query.split("&") if parts.query else ():
        if not piece:
            continue
        raw_key, _, raw_value = piece.partition("=")
        key, value = unquote(raw_key), unquote(raw_value)
        if key in OPTION_NAMES:
            if key in ours:
                raise ConfigError(f"store URL option {key!r} is given twice")
            ours[key] = value
        else:
            if key == "password":
                secrets.extend({value, raw_value})
            rest.append(piece)
    if password:
        secrets.extend({password, unquote(password)})
    conninfo = urlunsplit(parts._replace(query="&".join(rest)))
    netloc = (f"{unquote(user)}@" if user else "") + host + (f":{port}" if port else "")
    where = f"{parts.scheme}://{netloc}{parts.path}"
    return conninfo, ours, where, tuple(secrets)


def _split_keywords(conninfo: str) -> tuple[str, tuple[str, ...]]:
    """Describe a libpq ``key=value`` string without its password."""
    found = re.findall(r"(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", conninfo)
    fields = {key: value.strip("'") for key, value in found}
    shown = " ".join(
        f"{key}={fields[key]}"
        for key in ("host", "port", "dbname", "user")
        if key in fields
    )
    secret = fields.get("password")
    return f"libpq conninfo ({shown or 'defaults'})", (secret,) if secret else ()


def _check_conninfo(conninfo: str, secrets: tuple[str, ...]) -> None:
    """Let libpq's own parser judge the connection string, before any connection.

    psycopg is imported here, at store construction, never at plugin import.
    """
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(conninfo)
    except psycopg.Error as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid"
    else:
        return
    # Out of the handler: libpq's own text (masked below) may quote the password,
    # so the error carries no cause or context that keeps it unmasked.
    text = masked(text, secrets)
    if "invalid URI query parameter" in text or "invalid connection option" in text:
        # An unknown name is most often a misspelt option of the store.
        text += (
            f"; the store's own options are {', '.join(sorted(OPTION_NAMES))}, "
            "every other query parameter goes to libpq"
        )
    raise ConfigError(f"invalid PostgreSQL connection string: {text}")


def resolve_settings(
    url: object, keywords: Mapping[str, Any], *, injected_clock: bool = False
) -> Settings:
    """Validate ``url`` and options (keywords over query) into ``Settings`` (P1).

    With ``injected_clock`` the ttl is measured on a test clock, not in real
    milliseconds, so the real-time timeouts neither derive from it nor must stay
    below it: they default to their caps (5 s lock, 10 s idle in transaction).

    Raises:
        ConfigError: empty or non-string URL, a schema that is not
            ``^[A-Za-z_][A-Za-z0-9_]*$``, a ttl outside D9, a non-positive pool size
            or timeout, an idle-in-transaction timeout not below the ttl, or an
            option given both as ``pool_max_size`` and ``max_size``.
    """
    if not isinstance(url, str) or not url.strip():
        raise ConfigError("PostgresStore needs a non-empty URL string")
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme:
        if scheme not in SCHEMES:
            raise ConfigError(
                f"PostgresStore takes postgresql:// or postgres:// URLs, got "
                f"{redact_url(url)!r}"
            )
        conninfo, query_options, where, secrets = _split_url(url)
    else:
        conninfo, query_options = url, {}
        where, secrets = _split_keywords(url)
    options: dict[str, Any] = dict(query_options)
    options.update({key: value for key, value in keywords.items() if value is not None})
    if "max_size" in options and "pool_max_size" in options:
        raise ConfigError("give the pool size once: pool_max_size (alias max_size)")
    if "max_size" in options:
        options["pool_max_size"] = options.pop("max_size")

    _check_conninfo(conninfo, secrets)

    schema = options.get("schema", "public")
    if (
        not isinstance(schema, str)
        or _SCHEMA_RE.fullmatch(schema) is None
        or len(schema) > _MAX_SCHEMA_LENGTH
    ):
        raise ConfigError(
            f"schema must match ^[A-Za-z_][A-Za-z0-9_]*$ (at most 63 characters), "
            f"got {schema!r}"
        )
    raw_ttl = options.get("ttl_ms", DEFAULT_LEASE_TTL_MS)
    if isinstance(raw_ttl, str):
        raw_ttl = option_int(options, "ttl_ms", DEFAULT_LEASE_TTL_MS)
    ttl_ms = validate_ttl_ms(raw_ttl)
    pool_max_size = _positive(options, "pool_max_size", DEFAULT_POOL_MAX_SIZE)
    real_ttl_ms = _MAX_DERIVED_TTL_MS if injected_clock else ttl_ms
    lock_timeout_ms = _positive(
        options, "lock_timeout_ms", default_lock_timeout_ms(real_ttl_ms)
    )
    idle_ms = _positive(
        options,
        "idle_in_transaction_timeout_ms",
        default_idle_in_transaction_timeout_ms(real_ttl_ms),
    )
    if not injected_clock and idle_ms >= ttl_ms and idle_ms != 1:
        raise ConfigError(
            f"idle_in_transaction_timeout_ms ({idle_ms}) must be below ttl_ms "
            f"({ttl_ms}): a paused client inside a transaction must lose its locks "
            "before its lease can expire"
        )
    connect_timeout_s = _positive(
        options, "connect_timeout_s", DEFAULT_CONNECT_TIMEOUT_S
    )
    call_timeout_ms = _positive(
        options,
        "call_timeout_ms",
        default_call_timeout_ms(real_ttl_ms, lock_timeout_ms),
    )
    if call_timeout_ms <= lock_timeout_ms:
        raise ConfigError(
            f"call_timeout_ms ({call_timeout_ms}) must be above lock_timeout_ms "
            f"({lock_timeout_ms}): a call may wait that long for a run's lock"
        )
    readonly = option_bool(options, "readonly", False)
    return Settings(
        call_timeout_ms=call_timeout_ms,
        readonly=readonly,
        prepared_statements=option_bool(options, "prepared_statements", True),
        conninfo=conninfo,
        schema=schema,
        ttl_ms=ttl_ms,
        pool_max_size=pool_max_size,
        lock_timeout_ms=lock_timeout_ms,
        idle_in_transaction_timeout_ms=idle_ms,
        connect_timeout_s=connect_timeout_s,
        where=f"{where} (schema {schema})",
        secrets=secrets,
    )
