"""The one-host holder verdict (L11): dead only when provably so, never when unsure.

Real processes: this one, a sleeping child, a stopped child, an unreaped
(zombie) child and a reaped one; identities are edited only to stand for a
reused pid, another boot or another pid namespace.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from rulvar_store.backend import holder_is_dead, this_process


def _identity_of(pid: int) -> str:
    """The identity ``this_process`` would record for ``pid`` (same boot and namespace)."""
    mine = this_process()
    assert mine is not None
    boot, namespace, _, _ = mine.split("/")
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        text = stat.read()
    started = text[text.rfind(")") + 2 :].split()[19]
    return f"{boot}/{namespace}/{pid}/{started}"


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)
            process.kill()
            process.wait()


pytestmark = pytest.mark.skipif(
    this_process() is None, reason="no /proc: the verdict is always 'alive' here"
)


@pytest.mark.clause("L11")
def test_this_process_and_a_running_child_are_alive(
    child: subprocess.Popen[bytes],
) -> None:
    assert not holder_is_dead(this_process())
    assert not holder_is_dead(_identity_of(child.pid))


@pytest.mark.clause("L11")
def test_a_stopped_child_is_alive(child: subprocess.Popen[bytes]) -> None:
    identity = _identity_of(child.pid)
    child.send_signal(signal.SIGSTOP)
    os.waitpid(child.pid, os.WUNTRACED)
    assert not holder_is_dead(identity)


@pytest.mark.clause("L11")
def test_a_killed_child_is_dead_zombie_or_reaped(
    child: subprocess.Popen[bytes],
) -> None:
    identity = _identity_of(child.pid)
    os.kill(child.pid, signal.SIGKILL)
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # a zombie, not reaped
    assert holder_is_dead(identity)
    child.wait()  # reaped: no such pid
    assert holder_is_dead(identity)


@pytest.mark.clause("L11")
def test_a_reused_pid_is_told_apart_by_its_start_time(
    child: subprocess.Popen[bytes],
) -> None:
    boot, namespace, pid, started = _identity_of(child.pid).split("/")
    earlier = f"{boot}/{namespace}/{pid}/{int(started) - 1}"
    assert holder_is_dead(earlier)


@pytest.mark.clause("L11")
@pytest.mark.parametrize(
    "edit",
    [
        lambda b, n, p, s: f"another-boot/{n}/{p}/{s}",
        lambda b, n, p, s: f"{b}/pid:[1]/{p}/{s}",
        lambda b, n, p, s: "not an identity",
        lambda b, n, p, s: None,
    ],
    ids=["other-boot", "other-namespace", "garbage", "none"],
)
def test_what_this_host_cannot_judge_is_alive(edit: object) -> None:
    """Another host or boot, another container, an unreadable record: never dead."""
    mine = this_process()
    assert mine is not None
    boot, namespace, _, started = mine.split("/")
    gone = 2**22 + 12_345  # above the default pid_max: no such process
    identity = edit(boot, namespace, gone, started)  # type: ignore[operator]
    assert not holder_is_dead(identity)
