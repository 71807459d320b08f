"""The read-only open modes observers rely on: intake and refusal of writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rulvar_store import ConfigError, open_store
from tests.operator._places import postgres_url, with_query


@pytest.mark.clause("A2")
@pytest.mark.parametrize("value", ["maybe", "2"])
def test_sqlite_readonly_option_must_be_a_boolean(tmp_path: Path, value: str) -> None:
    """A2: readonly= takes true/false only; anything else is a ConfigError before the file is touched."""
    with pytest.raises(ConfigError, match="readonly"):
        open_store(f"sqlite:///{tmp_path / 'x.db'}?readonly={value}")
    assert not (tmp_path / "x.db").exists()


@pytest.mark.clause("A2")
def test_sqlite_readonly_refuses_memory_and_missing_files(tmp_path: Path) -> None:
    """A2: a read-only open of ':memory:' or of a missing file is a ConfigError and creates nothing."""
    with pytest.raises(ConfigError, match="readonly needs a database file"):
        open_store("sqlite://:memory:", readonly=True)
    with pytest.raises(ConfigError, match="unable to open"):
        open_store(f"sqlite:///{tmp_path / 'missing.db'}", readonly=True)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.clause("A2")
def test_postgres_readonly_sessions_refuse_writes_and_skip_the_boot() -> None:
    """A2: readonly PostgreSQL stores create no schema and the server refuses their writes."""
    import secrets

    import psycopg

    from tests.operator._places import drop_schema

    admin = postgres_url()
    schema = f"rulvar_op_{secrets.token_hex(5)}"
    try:
        with open_store(with_query(admin, schema=schema)) as writer:
            writer.journal.put_meta(
                {"runId": "run-a", "status": "ok", "updatedAt": "t"}
            )
        with open_store(with_query(admin, schema=schema, readonly="true")) as reader:
            assert [m["runId"] for m in reader.journal.list_runs()] == ["run-a"]
            with pytest.raises(ConfigError, match="read-only transaction"):
                reader.journal.put_meta(
                    {"runId": "run-b", "status": "ok", "updatedAt": "t"}
                )
            with pytest.raises(ConfigError, match="read-only transaction"):
                reader.journal.acquire("run-a", "observer")  # type: ignore[attr-defined]
        absent = f"rulvar_op_{secrets.token_hex(5)}"
        with (
            open_store(with_query(admin, schema=absent), readonly=True) as reader,
            pytest.raises(ConfigError, match="holds no rulvar store"),
        ):
            reader.journal.list_runs()
        with psycopg.connect(admin, autocommit=True) as conn:
            found = conn.execute(
                "SELECT 1 FROM pg_namespace WHERE nspname = %s", (absent,)
            ).fetchall()
        assert found == []
    finally:
        drop_schema(admin, schema)
