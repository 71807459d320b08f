"""Out of file descriptors at open is retryable on every backend (issue 21 item 11).

SQLite reports any failed open as SQLITE_CANTOPEN, which was a permanent
``ConfigError``; PostgreSQL (a failed connect) and the file store (``EMFILE``)
report the same condition as the retryable ``StoreUnavailableError``. A child
process lowers its descriptor limit, fills it, and opens: the SQLite store and
the file store both raise the retryable error, and both work once a few
descriptors are closed again. A wrong path is still a ``ConfigError``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_CHILD = textwrap.dedent(
    """
    import errno, json, os, resource, sys
    from rulvar_store import JsonlFileStore
    from rulvar_store.errors import RulvarError
    from rulvar_store_sqlite import SqliteStore
    import rulvar_store_sqlite._store, rulvar_store_sqlite._errors  # imports need files

    folder = sys.argv[1]
    journal = JsonlFileStore(os.path.join(folder, "files"))
    SqliteStore(os.path.join(folder, "old.db")).close()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
    held = []
    try:
        while True:
            held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError as exc:
        if exc.errno != errno.EMFILE:
            raise  # only the descriptor limit ends the hoarding

    def outcome(call):
        try:
            call()
        except RulvarError as exc:
            return [type(exc).__name__, exc.retryable]
        return ["ok", None]

    report = {
        "sqlite": outcome(lambda: SqliteStore(os.path.join(folder, "runs.db"))),
        "file": outcome(lambda: journal.append("run", {"seq": 0})),
        # No file to create first: the failure comes from SQLite's own open.
        "sqlite existing": outcome(
            lambda: SqliteStore(os.path.join(folder, "old.db"), private=False)
        ),
    }
    for fd in held[:20]:
        os.close(fd)
    report["sqlite later"] = outcome(
        lambda: SqliteStore(os.path.join(folder, "runs.db")).close()
    )
    report["file later"] = outcome(lambda: journal.append("run", {"seq": 1}))
    report["wrong path"] = outcome(
        lambda: SqliteStore(os.path.join(folder, "missing", "runs.db"))
    )
    print(json.dumps(report))
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX descriptor limits")
def test_no_descriptor_left_is_retryable_on_sqlite_and_file_stores(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    report = json.loads(done.stdout)
    assert report["sqlite"] == ["StoreUnavailableError", True]
    assert report["file"] == ["StoreUnavailableError", True]
    assert report["sqlite existing"] == ["StoreUnavailableError", True]
    assert report["sqlite later"] == ["ok", None]
    assert report["file later"] == ["ok", None]
    assert report["wrong path"] == ["ConfigError", False]
