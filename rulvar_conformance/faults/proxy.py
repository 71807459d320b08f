"""The fallback where namespaces cannot be made (not root): a TCP fault proxy on loopback.

Writer host ``i`` reaches the server through its own listening port; the proxy
pumps bytes both ways on two threads per connection and can:

- ``cut(i)``: stop pumping (both directions) and hold new connections until
  ``heal(i)``. Unlike a real partition the proxy's kernel still acknowledges
  what the writer sends, so the writer's TCP timeouts do not fire: its calls
  stall until the heal (the report says which layer ran).
- ``reset(i)``: close every connection of host ``i`` with SO_LINGER 0 on both
  sides, so each end gets a RST.
- ``degrade(i)``: delay every chunk (no loss: TCP would hide it anyway).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Final

__all__ = ["FaultProxy"]

CHUNK: Final = 65536
ACCEPT_POLL_S: Final = 0.2


@dataclass
class _Host:
    listener: socket.socket
    healed: threading.Event = field(default_factory=threading.Event)
    delay_s: float = 0.0
    pairs: list[tuple[socket.socket, socket.socket]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.healed.set()


def _abort(sock: socket.socket) -> None:
    """Reset ``sock``: linger 0 makes its close a RST; shutdown wakes the pump
    blocked in ``recv`` on it (a plain close would not, and nothing would be sent
    while that thread still holds the socket), and the pump then closes it."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)


class FaultProxy:
    """One listening port per writer host, all forwarding to ``(address, port)``."""

    def __init__(self, hosts: int, address: str, port: int) -> None:
        self.target = (address, port)
        self.hosts: list[_Host] = []
        self.lock = threading.Lock()
        self.closed = threading.Event()
        for _ in range(hosts):
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.bind(("127.0.0.1", 0))
            listener.listen(64)
            listener.settimeout(ACCEPT_POLL_S)
            self.hosts.append(_Host(listener))
        for host in self.hosts:
            threading.Thread(target=self._accept, args=(host,), daemon=True).start()

    def port_of(self, index: int) -> int:
        return int(self.hosts[index].listener.getsockname()[1])

    def _accept(self, host: _Host) -> None:
        while not self.closed.is_set():
            try:
                client, _ = host.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(
                target=self._open, args=(host, client), daemon=True
            ).start()

    def _open(self, host: _Host, client: socket.socket) -> None:
        host.healed.wait()  # a cut host's new connections wait for the heal
        try:
            upstream = socket.create_connection(self.target)
        except OSError:
            _abort(client)
            client.close()
            return
        # Each end set TCP_NODELAY on its own socket (libpq does); without it here
        # Nagle's algorithm would hold a pipelined client's second small write
        # for the delayed ACK (~40 ms), a stall no real network path adds.
        for sock in (client, upstream):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.lock:
            host.pairs.append((client, upstream))
        if self.closed.is_set():
            # close() ran while this connection was being made: its reset may
            # have taken the pair list before this pair joined it, so the two
            # sockets are reset here rather than left open (leaked).
            for sock in (client, upstream):
                _abort(sock)
                sock.close()
            return
        for source, sink in ((client, upstream), (upstream, client)):
            threading.Thread(
                target=self._pump, args=(host, source, sink), daemon=True
            ).start()

    def _pump(self, host: _Host, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(CHUNK)
                if not data:
                    break
                host.healed.wait()
                if host.delay_s:
                    time.sleep(host.delay_s)
                sink.sendall(data)
        except OSError:
            pass  # either side reset or closed (a reset is one of the faults): stop
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()  # the other pump's recv then fails and it ends too

    def cut(self, index: int) -> None:
        self.hosts[index].healed.clear()

    def heal(self, index: int) -> None:
        self.hosts[index].healed.set()

    def reset(self, index: int) -> int:
        host = self.hosts[index]
        with self.lock:
            pairs, host.pairs = host.pairs, []
        live = [pair for pair in pairs if pair[0].fileno() != -1]
        for client, upstream in live:
            _abort(client)
            _abort(upstream)
        return len(live)

    def degrade(self, index: int, delay_ms: int, loss_pct: float) -> str:
        """Delay only: a loss between the proxy's two sockets would be retransmitted
        by neither, so ``loss_pct`` is not applied (the record says so)."""
        self.hosts[index].delay_s = delay_ms / 1000.0
        return f"proxy delay {delay_ms} ms per chunk (no loss: {loss_pct}% not applied)"

    def restore(self, index: int) -> dict[str, int]:
        self.hosts[index].delay_s = 0.0
        return {}  # the proxy counts no packets

    def close(self) -> None:
        self.closed.set()
        for index, host in enumerate(self.hosts):
            host.healed.set()
            self.reset(index)
            host.listener.close()
