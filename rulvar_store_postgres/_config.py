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

from rulvar_store import DEFAULT_LEASE_TTL_MS
from rulvar_store.backend import option_bool, option_int, redact_url, validate_ttl_ms
from rulvar_store.errors import ConfigError
from rulvar_store_postgres._conninfo import split_keywords, split_url
from rulvar_store_postgres._log_mask import masked

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_POOL_MAX_SIZE",
    "MULTI_HOST_CONNECT_TIMEOUT_S",
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
# Per host of a multi-host URL: psycopg's floor. A black-holed first host
# costs this much per connection attempt (libpq's default is none, psycopg's 130 s).
MULTI_HOST_CONNECT_TIMEOUT_S: Final = 2
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
        "replication",
    }
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
    # "required": refuse a server whose acknowledged commits a failover can
    # take back (``_primary``); "any": accept it, report it (P20).
    replication: str = "any"


def _positive(options: Mapping[str, Any], name: str, default: int) -> int:
    value = option_int(options, name, default)
    if value < 1:
        raise ConfigError(f"option {name} must be a positive integer, got {value}")
    return value


def _check_conninfo(conninfo: str, secrets: tuple[str, ...]) -> dict[str, Any]:
    """Let libpq's own parser judge the connection string, before any connection.

    psycopg is imported here, at store construction, never at plugin import.
    """
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        return conninfo_to_dict(conninfo)
    except psycopg.Error as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid"
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


def _check_ports(ports: str, where: str) -> None:
    """Refuse a port libpq would refuse only when connecting: a configuration
    mistake, said as one, never a retryable "unreachable" after a connect try.

    Raises:
        ConfigError: a port of the (comma-separated) list is no integer or is
            outside 1-65535.
    """
    for port in ports.split(","):
        port = port.strip()
        if not port:
            continue  # libpq's default port for that host
        if not port.isdigit():
            raise ConfigError(
                f"malformed PostgreSQL URL {where!r}: its port is not an integer"
            )
        if not 0 < int(port) <= 65535:
            raise ConfigError(
                f"malformed PostgreSQL URL {where!r}: its port is out of range (1-65535)"
            )


def _with_parameter(conninfo: str, key: str, value: str) -> str:
    """``conninfo`` with one more libpq parameter, in its own form (URL or key=value)."""
    if "://" not in conninfo:
        return f"{conninfo} {key}={value}"
    return f"{conninfo}{'&' if '?' in conninfo else '?'}{key}={value}"


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
        split = split_url(url, OPTION_NAMES)
    else:
        split = split_keywords(url)
    conninfo, query_options = split.conninfo, split.options
    where, secrets = split.where, split.secrets
    options: dict[str, Any] = dict(query_options)
    options.update({key: value for key, value in keywords.items() if value is not None})
    if "max_size" in options and "pool_max_size" in options:
        raise ConfigError("give the pool size once: pool_max_size (alias max_size)")
    if "max_size" in options:
        options["pool_max_size"] = options.pop("max_size")

    given = _check_conninfo(conninfo, secrets)
    _check_ports(str(given.get("port") or ""), where)

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
    several = any("," in str(given.get(key) or "") for key in ("host", "hostaddr"))
    connect_timeout_s = _positive(
        options,
        "connect_timeout_s",
        MULTI_HOST_CONNECT_TIMEOUT_S if several else DEFAULT_CONNECT_TIMEOUT_S,
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
    replication = options.get("replication", "any")
    if replication not in ("any", "required"):
        raise ConfigError(
            f"option replication must be 'any' or 'required', got {replication!r}"
        )
    if not readonly and "target_session_attrs" not in given:
        # A fenced store writes: libpq passes over standbys and read-only
        # servers of a multi-host URL (P16). The URL's own value wins.
        conninfo = _with_parameter(conninfo, "target_session_attrs", "read-write")
    return Settings(
        replication=replication,
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
