"""P16/P18/P20/P21 without a server: URL intake, host order and the server verdicts.

The URL is cut the way libpq cuts it (``_conninfo``); the cluster's host order,
timeline and replication verdicts (``_primary``) are pure decisions on a
server's ``PROBE`` answer. The same code runs against real servers in
``test_postgres_follows_primary``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import pytest

from rulvar_store import ConfigError
from rulvar_store.backend import redact_url
from rulvar_store_postgres._config import OPTION_NAMES, resolve_settings
from rulvar_store_postgres._conninfo import split_keywords, split_url
from rulvar_store_postgres._primary import (
    SUSPECT_EVERY_S,
    TIMELINE_TRUST_S,
    Cluster,
    NotPrimary,
    Refused,
    ServerState,
    replication_mode,
)

PRIMARY = ServerState(
    in_recovery=False,
    timeline=1,
    synchronous_commit="on",
    standby_names="",
    sync_streaming=0,
    standbys=2,
    hidden=0,
    started="2026-01-01 00:00:00+00",
)


@pytest.mark.clause("P16")
@pytest.mark.parametrize(
    ("url", "where"),
    [
        (
            "postgresql://u@h1:5432,h2:5433,h3:5434/db",
            "postgresql://u@h1:5432,h2:5433,h3:5434/db",
        ),
        ("postgresql:///db", "postgresql:///db"),
        ("postgresql://", "postgresql://"),
        (
            "postgresql://u@%2Fvar%2Frun%2Fpostgresql/db",
            "postgresql://u@/var/run/postgresql/db",
        ),
        (
            "postgresql:///db?host=h1,h2&port=1,2&user=u",
            "postgresql:///db?host=h1,h2&port=1,2&user=u",
        ),
        ("postgres://u:pw@[::1]:5432/db", "postgres://u@[::1]:5432/db"),
    ],
)
def test_every_libpq_url_spelling_is_passed_through(url: str, where: str) -> None:
    """P16: libpq gets the URL as written (our options aside); messages name no password."""
    split = split_url(url, OPTION_NAMES)
    assert split.conninfo == url
    assert split.where == where
    assert "pw" not in split.where


@pytest.mark.clause("P16")
def test_store_options_are_taken_out_and_libpq_ones_kept() -> None:
    split = split_url(
        "postgresql://u:p%40ss@h1,h2/db?schema=a&sslmode=disable&password=x&ttl_ms=9",
        OPTION_NAMES,
    )
    assert split.options == {"schema": "a", "ttl_ms": "9"}
    assert split.conninfo == "postgresql://u:p%40ss@h1,h2/db?sslmode=disable&password=x"
    assert set(split.secrets) >= {"p@ss", "p%40ss", "x"}


@pytest.mark.clause("P16")
def test_an_at_sign_inside_the_query_ends_no_credentials() -> None:
    split = split_url("postgresql://h/db?application_name=a@b", OPTION_NAMES)
    assert split.conninfo == "postgresql://h/db?application_name=a@b"


@pytest.mark.clause("P11")
def test_key_value_strings_are_described_and_redacted_without_their_password() -> None:
    text = "host=h1,h2 port=5432 dbname=runs user=app password='se cret'"
    split = split_keywords(text)
    assert split.where == "libpq conninfo (host=h1,h2 port=5432 dbname=runs user=app)"
    assert split.secrets == ("se cret",)
    assert redact_url(text) == "host=h1,h2 port=5432 dbname=runs user=app password=***"
    assert "s3" not in redact_url("host=h password=s3")


@pytest.mark.clause("P16")
def test_fenced_stores_ask_for_the_writable_server_with_a_bounded_connect() -> None:
    """P16: read-write unless the URL says otherwise; 2 s per host on a multi-host URL."""
    many = resolve_settings("postgresql://u@h1:1,h2:2/db", {})
    assert many.conninfo.endswith("?target_session_attrs=read-write")
    assert many.connect_timeout_s == 2
    one = resolve_settings("host=h dbname=d", {})
    assert one.conninfo == "host=h dbname=d target_session_attrs=read-write"
    assert one.connect_timeout_s == 5
    given = resolve_settings("postgresql://h1,h2/db?target_session_attrs=any", {})
    assert given.conninfo == "postgresql://h1,h2/db?target_session_attrs=any"
    observer = resolve_settings("postgresql://h1,h2/db", {"readonly": True})
    assert "target_session_attrs" not in observer.conninfo
    with pytest.raises(ConfigError, match="replication must be 'any' or 'required'"):
        resolve_settings("postgresql://h/db?replication=maybe", {})


@dataclass
class _Info:
    host: str
    port: int
    hostaddr: str = ""


@dataclass
class _Conn:
    info: _Info


@pytest.mark.clause("P21")
def test_the_primary_goes_first_and_a_bad_host_last() -> None:
    """P21: the admitted host is tried first, a demoted one last; one host: unchanged."""
    cluster = Cluster(
        "postgresql://u@h1:1,h2:2,h3:3/db", "w", replication="any", fenced=True
    )
    assert "host=h1,h2,h3 port=1,2,3" in cluster.conninfo()
    cluster.prefer(_Conn(_Info("h3", 3)))  # type: ignore[arg-type]
    assert "host=h3,h1,h2 port=3,1,2" in cluster.conninfo()
    cluster.demote(_Conn(_Info("h3", 3)))  # type: ignore[arg-type]
    assert "host=h1,h2,h3 port=1,2,3" in cluster.conninfo()
    assert cluster.hosts == 3
    mismatched = "postgresql://u@h1,h2,h3/db?port=1,2"  # libpq refuses it itself
    assert Cluster(mismatched, "w", replication="any", fenced=True).hosts == 1
    single = Cluster("postgresql://u@h1/db", "w", replication="any", fenced=True)
    assert single.conninfo() == "postgresql://u@h1/db"
    assert single.hosts == 1


@pytest.mark.clause("P18")
@pytest.mark.clause("P21")
def test_standbys_and_superseded_primaries_are_refused() -> None:
    cluster = Cluster("postgresql://h/db", "w", replication="any", fenced=True)
    cluster.admit(replace(PRIMARY, timeline=2))
    with pytest.raises(NotPrimary, match="behind timeline 2"):
        cluster.admit(PRIMARY)
    assert not cluster.current(1)
    assert cluster.current(2)
    assert cluster.current(0)  # a standby's connection (observers only)
    with pytest.raises(NotPrimary, match="in recovery"):
        cluster.admit(replace(PRIMARY, in_recovery=True, timeline=0))
    # No primary on timeline 2 for TIMELINE_TRUST_S: a rebuilt cluster, accepted.
    cluster._timeline_seen_at -= TIMELINE_TRUST_S + 1
    cluster.admit(PRIMARY)
    assert cluster.timeline == 1
    observer = Cluster("postgresql://h/db", "w", replication="any", fenced=False)
    observer.admit(replace(PRIMARY, in_recovery=True, timeline=0))


@pytest.mark.clause("P20")
@pytest.mark.parametrize(
    ("commit", "names", "mode"),
    [
        ("on", "", "async"),
        ("off", "s1", "async"),
        ("local", "s1", "async"),
        ("on", "s1", "sync"),
        ("remote_apply", "FIRST 1 (s1, s2)", "sync"),
        ("remote_write", "ANY 1 (s1, s2)", "quorum"),
    ],
)
def test_replication_modes(commit: str, names: str, mode: str) -> None:
    assert replication_mode(commit, names) == mode


@pytest.mark.clause("P21")
def test_a_synchronous_primary_without_its_standbys_is_starved() -> None:
    sync = replace(PRIMARY, standby_names="FIRST 2 (a, b, c)", sync_streaming=1)
    assert sync.starved
    assert not replace(sync, sync_streaming=2).starved
    assert not replace(sync, hidden=2).starved  # unknown is never "none"
    assert replace(PRIMARY, standby_names="a", sync_streaming=0).starved
    assert not PRIMARY.starved  # async never waits


@pytest.mark.clause("P20")
def test_the_guard_refuses_async_and_the_default_warns_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    required = Cluster("postgresql://h/db", "w", replication="required", fenced=True)
    with pytest.raises(Refused) as caught:
        required.admit(PRIMARY)
    assert isinstance(caught.value.config_error, ConfigError)
    assert "synchronous_mode_strict" in str(caught.value.config_error)
    required.admit(replace(PRIMARY, standby_names="ANY 1 (a, b)"))
    caplog.set_level(logging.WARNING, logger="rulvar_store_postgres")
    default = Cluster("postgresql://h/db", "w", replication="any", fenced=True)
    default.admit(PRIMARY)
    default.admit(PRIMARY)
    warned = [r for r in caplog.records if "asynchronously" in r.getMessage()]
    assert len(warned) == 1


@pytest.mark.clause("P21")
def test_a_primary_left_without_its_standbys_is_suspected_once_per_interval() -> None:
    """P21: sync without its standby, or async that lost every standby, is set aside
    (once per SUSPECT_EVERY_S); a lone server that never had standbys is not."""
    cluster = Cluster("postgresql://h/db", "w", replication="any", fenced=True)
    cluster.admit(PRIMARY)  # two standbys attached
    orphaned = replace(PRIMARY, standbys=0)
    assert cluster.suspect(orphaned)
    assert not cluster.suspect(orphaned)  # rate-limited
    cluster._suspected_at -= SUSPECT_EVERY_S
    assert cluster.suspect(replace(PRIMARY, standby_names="s1", standbys=1))
    lone = Cluster("postgresql://h/db", "w", replication="any", fenced=True)
    lone.admit(orphaned)
    assert not lone.suspect(orphaned)
    assert not lone.suspect(replace(orphaned, in_recovery=True))
