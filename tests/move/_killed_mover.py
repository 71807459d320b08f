"""A ``rulvar`` command that SIGKILLs itself when a copy's n-th batch reaches a failpoint.

    python tests/move/_killed_mover.py N POINT -- runs copy SRC DST --all

Used by the resume tests: a real process dying part way, as an operator's would.
"""

from __future__ import annotations

import os
import signal
import sys

from rulvar_store.backend import set_failpoint_hook


def main() -> None:
    limit, point = int(sys.argv[1]), sys.argv[2]
    args = sys.argv[sys.argv.index("--") + 1 :]
    seen = 0

    def hook(operation: str, where: str) -> None:
        nonlocal seen
        if operation == "write_rows" and where == point:
            seen += 1
            if seen == limit:
                os.kill(os.getpid(), signal.SIGKILL)

    set_failpoint_hook(hook)
    from rulvar_cli import main as rulvar

    rulvar(args)


if __name__ == "__main__":
    main()
