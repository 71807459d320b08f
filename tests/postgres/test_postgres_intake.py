"""Intake (P1), URL options, the plugin registration and credential redaction."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest

from rulvar_store import ConfigError, list_backends, open_store
from rulvar_store.backend import make_plugin_manager
from rulvar_store_postgres import PostgresFencedTranscriptStore, PostgresStore
from rulvar_store_postgres._config import (
    default_idle_in_transaction_timeout_ms,
    resolve_settings,
)
from rulvar_store_postgres._plans import Step

pytestmark = pytest.mark.postgres

# Port 1 on loopback: nothing listens there, so any attempt to connect would fail
# loudly; intake errors must come first.
NOWHERE = "postgresql://nobody:s3cr3t-pw@127.0.0.1:1/none"


@pytest.mark.clause("P1")
@pytest.mark.parametrize(
    ("url", "options"),
    [
        ("", {}),
        ("   ", {}),
        (None, {}),
        (42, {}),
        ("mysql://host/db", {}),
        (NOWHERE, {"schema": "1starts_with_digit"}),
        (NOWHERE, {"schema": "has-dash"}),
        (NOWHERE, {"schema": 'quote"d'}),
        (NOWHERE, {"schema": ""}),
        (NOWHERE, {"schema": "x" * 64}),
        (NOWHERE, {"ttl_ms": 0}),
        (NOWHERE, {"ttl_ms": -5}),
        (NOWHERE, {"ttl_ms": True}),
        (NOWHERE, {"ttl_ms": 1.5}),
        (NOWHERE, {"ttl_ms": 2_147_483_648}),
        (NOWHERE, {"pool_max_size": 0}),
        (NOWHERE, {"pool_max_size": -1}),
        (NOWHERE, {"lock_timeout_ms": 0}),
        (NOWHERE, {"connect_timeout_s": 0}),
        (NOWHERE, {"ttl_ms": 1000, "idle_in_transaction_timeout_ms": 1000}),
        (NOWHERE, {"pool_max_size": 3, "max_size": 4}),
        (NOWHERE + "?schema=bad-name", {}),
        (NOWHERE + "?ttl_ms=abc", {}),
        (NOWHERE + "?ttl_ms=1&ttl_ms=2", {}),
        (NOWHERE + "?no_such_libpq_parameter=1", {}),
        ("host=127.0.0.1 dbname", {}),
    ],
)
def test_bad_url_or_option_raises_config_error_before_connecting(
    url: Any, options: dict[str, Any]
) -> None:
    """P1: a bad URL, schema, ttl (D9), pool size or timeout is a ConfigError at once."""
    with pytest.raises(ConfigError):
        PostgresStore(url, **options)


@pytest.mark.clause("P1")
def test_constructor_does_not_connect() -> None:
    """P1/P3: construction validates only; an unreachable server is not contacted."""
    store = PostgresStore(NOWHERE, schema="valid_name", ttl_ms=1_000)
    assert store.lease_ttl_ms == 1_000
    assert store.schema == "valid_name"
    store.close()


@pytest.mark.clause("P1")
def test_query_options_are_parsed_and_stripped_before_libpq() -> None:
    """Our options ride in the query string; libpq parameters stay, ours are removed."""
    settings = resolve_settings(
        "postgres://u@h:5433/db?sslmode=disable&schema=tenant_a&ttl_ms=30000"
        "&pool_max_size=3&lock_timeout_ms=250&application_name=x",
        {},
    )
    assert settings.schema == "tenant_a"
    assert settings.ttl_ms == 30_000
    assert settings.pool_max_size == 3
    assert settings.lock_timeout_ms == 250
    assert settings.idle_in_transaction_timeout_ms == 10_000
    # A fenced store asks libpq for the writable server (P16).
    assert settings.conninfo == (
        "postgres://u@h:5433/db?sslmode=disable&application_name=x"
        "&target_session_attrs=read-write"
    )


@pytest.mark.clause("P1")
def test_keyword_options_win_over_the_query_string() -> None:
    """A keyword option overrides the same option in the URL."""
    settings = resolve_settings(
        "postgresql://h/db?schema=from_url&ttl_ms=5000", {"schema": "from_kw"}
    )
    assert (settings.schema, settings.ttl_ms) == ("from_kw", 5_000)


@pytest.mark.clause("P1")
def test_idle_in_transaction_default_stays_below_the_ttl() -> None:
    """The derived idle-in-transaction timeout is always below the ttl (for ttl > 1)."""
    for ttl in (2, 3, 250, 1_200, 60_000, 600_000, 2_147_483_647):
        assert 1 <= default_idle_in_transaction_timeout_ms(ttl) < ttl


@pytest.mark.clause("P1")
def test_config_errors_never_show_the_password() -> None:
    """Credentials never appear in an error message (URL password or query password)."""
    cases: list[tuple[str, dict[str, Any]]] = [
        (NOWHERE, {"schema": "bad-name"}),
        ("postgresql://h/db?password=s3cr3t-pw&ttl_ms=zero", {}),
        ("mysql://u:s3cr3t-pw@h/db", {}),
    ]
    for url, options in cases:
        with pytest.raises(ConfigError) as caught:
            PostgresStore(url, **options)
        assert "s3cr3t-pw" not in str(caught.value)


@pytest.mark.clause("P1")
def test_unreachable_server_error_never_shows_the_password() -> None:
    """A connection failure names the target without its password."""
    from rulvar_store import StoreUnavailableError

    with PostgresStore(NOWHERE, connect_timeout_s=2) as store:
        with pytest.raises(StoreUnavailableError) as caught:
            store.get_meta("x")
        assert "s3cr3t-pw" not in str(caught.value)
        assert "127.0.0.1:1" in str(caught.value)
        assert "s3cr3t-pw" not in repr(store)


def test_store_and_twin_satisfy_the_spi_protocols() -> None:
    """PostgresStore is a Leasable/MetaLookup JournalStore, its twin a TranscriptStore."""
    from rulvar_store import (
        JournalStore,
        LeasableStore,
        MetaLookupStore,
        TranscriptStore,
    )

    with PostgresStore(NOWHERE) as store:
        journal: JournalStore = store
        leasable: LeasableStore = store
        lookup: MetaLookupStore = store
        twin: TranscriptStore = store.transcripts()
        for value, protocol in [
            (journal, JournalStore),
            (leasable, LeasableStore),
            (lookup, MetaLookupStore),
            (twin, TranscriptStore),
        ]:
            assert isinstance(value, protocol)


def test_plugin_lists_postgres_without_importing_psycopg() -> None:
    """The entry point loads without the driver: listing backends imports no psycopg."""
    script = textwrap.dedent(
        """
        import sys
        from rulvar_store import list_backends
        names = {info.backend.name for info in list_backends()}
        assert "postgresql" in names, names
        leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("psycopg", "psycopg_pool"))
        assert not leaked, leaked
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)


def test_plugin_declares_the_backend() -> None:
    """Backend(requires, extra, capabilities) are declared as the issue fixes them."""
    (info,) = [
        i
        for i in list_backends(make_plugin_manager())
        if i.backend.name == "postgresql"
    ]
    backend = info.backend
    assert set(backend.schemes) == {"postgresql", "postgres"}
    assert backend.requires == ("psycopg", "psycopg_pool")
    assert backend.extra == "postgres"
    assert backend.capabilities == {
        "leases",
        "meta_lookup",
        "fenced_writes",
        "fenced_transcripts",
    }
    assert backend.certify is not None


def test_open_store_refuses_unknown_keyword_options() -> None:
    """open_store keyword options are the store's own; libpq ones go in the URL."""
    with pytest.raises(ConfigError):
        open_store(NOWHERE, sslmode="disable")


def test_open_store_builds_a_postgres_pair() -> None:
    """open_store returns the store and its twin; nothing connects yet."""
    with open_store(NOWHERE + "?schema=s1&sslmode=disable", ttl_ms=2_000) as opened:
        assert isinstance(opened.journal, PostgresStore)
        assert isinstance(opened.transcripts, PostgresFencedTranscriptStore)
        assert opened.journal.lease_ttl_ms == 2_000
        assert opened.journal.schema == "s1"


@pytest.mark.clause("X5")
def test_certify_opens_a_fresh_schema_per_location_and_drops_them(
    pg_url: str, admin: Any
) -> None:
    """The plugin's certify: a fresh schema per factory call, the suites pass, all dropped.

    Two suites that open many locations (one per check, two handles each) are
    enough to see the schemas come and go; every default suite on PostgreSQL is
    certified by tests/conformance/test_certify_backends.py.
    """
    from rulvar_conformance import (
        Certification,
        certification_suites,
        probe_capabilities,
        run_suites,
    )
    from rulvar_store.backend import StoreLocation, parse_store_url

    (info,) = [i for i in list_backends() if i.backend.name == "postgresql"]
    certify = info.backend.certify
    assert certify is not None
    used: list[str] = []
    with certify(parse_store_url(pg_url)) as locations:

        def recording() -> StoreLocation:
            location = locations()
            with location.open() as opened:
                assert isinstance(opened.journal, PostgresStore)
                used.append(opened.journal.schema)
            return location

        capabilities = probe_capabilities(recording)
        assert capabilities == info.backend.capabilities
        results = run_suites(
            certification_suites(
                Certification(recording, capabilities), ["journal", "two-handles"]
            )
        )
    failed = [r.error for r in results if not r.passed]
    assert not failed
    assert len(results) >= 15
    assert len(set(used)) == len(used) > 15  # a fresh schema per location
    left = admin.execute(
        "SELECT count(*) FROM pg_namespace WHERE nspname = ANY(%s)", (used,)
    ).fetchone()
    assert left == (0,)


@pytest.mark.clause("P1")
def test_libpq_query_parameters_reach_the_server_verbatim(
    pg_url: str, make_store: Any
) -> None:
    """libpq parameters pass through undecoded ('%20' stays a space, not '+')."""
    sep = "&" if "?" in pg_url else "?"
    url = f"{pg_url}{sep}options=-c%20statement_timeout%3D4321&ttl_ms=9000"
    store = PostgresStore(url, schema=make_store().schema)
    try:
        assert store.lease_ttl_ms == 9_000
        probe = Step("probe", "rows", "SHOW statement_timeout", (), lambda rows: rows)
        (value,) = store._run(probe)[0]
        assert value == "4321ms"
    finally:
        store.close()


@pytest.mark.clause("P10")
@pytest.mark.parametrize(("ci", "expected_rc"), [("", 0), ("true", 1)])
def test_without_a_server_tests_skip_locally_and_fail_under_ci(
    ci: str, expected_rc: int
) -> None:
    """P10: no RULVAR_TEST_POSTGRES_URL -> skip with a reason; with CI=true -> fail."""
    import os
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RULVAR_TEST_POSTGRES_URL", "RULVAR_POSTGRES_URL", "CI")
    }
    if ci:
        env["CI"] = ci
    target = "tests/postgres/test_postgres_format.py::test_boot_is_lazy_and_creates_a_missing_schema"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", target],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == expected_rc, done.stdout[-2000:]
    assert "RULVAR_TEST_POSTGRES_URL" in done.stdout
