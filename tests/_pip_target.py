"""Install a scratch distribution into a private directory, as the plugin tests need."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["install_into"]


def install_into(source: Path, site: Path) -> None:
    """``pip install`` ``source`` (no deps, no build isolation) into ``site``."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(site),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
