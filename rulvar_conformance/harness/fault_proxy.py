"""A TCP proxy on loopback whose forwarding can stall: a link that stops, not drops.

``FaultProxy(target)`` listens on ``127.0.0.1`` (a free port) and forwards each
accepted connection to ``target`` byte for byte. ``stall()`` stops forwarding
in both directions while every socket stays open, as a stuck middlebox or a
frozen peer does: nothing is refused or reset, the kernel keeps acknowledging,
replies simply never come. ``resume()`` forwards again (what was held is
delivered); ``close()`` ends everything. The kit starts it for fault checks;
tests use it as well. Only loopback, only the target it was given.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from typing import Final

__all__ = ["FaultProxy"]

_POLL_S: Final = 0.05  # how often a pump looks at the stall flag
_CHUNK: Final = 65536


class FaultProxy:
    """Forward ``127.0.0.1:<port>`` to ``target``; ``stall()``/``resume()`` at will."""

    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._forwarding = threading.Event()
        self._forwarding.set()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    @property
    def address(self) -> tuple[str, int]:
        """Where clients connect: ``("127.0.0.1", port)``."""
        host, port = self._listener.getsockname()[:2]
        return str(host), int(port)

    def stall(self) -> None:
        """Stop forwarding in both directions; every connection stays open."""
        self._forwarding.clear()

    def resume(self) -> None:
        """Forward again, held bytes included."""
        self._forwarding.set()

    def close(self) -> None:
        """Close the listener and every forwarded connection; join the pumps."""
        self._closed.set()
        self._forwarding.set()
        # A shutdown wakes the accept() blocked on the listener (a close alone
        # does not on Linux, and the join below would wait out its timeout).
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                server = socket.create_connection(self._target, timeout=10)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets.extend((client, server))
            if self._closed.is_set():
                # close() ran while this connection was being made: its list
                # copy missed these two, so they are closed here.
                client.close()
                server.close()
                return
            for source, sink in ((client, server), (server, client)):
                pump = threading.Thread(
                    target=self._pump, args=(source, sink), daemon=True
                )
                self._threads.append(pump)
                pump.start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        while not self._closed.is_set():
            if not self._forwarding.wait(_POLL_S):
                continue  # stalled: read nothing, so nothing moves
            try:
                ready, _, _ = select.select([source], [], [], _POLL_S)
                if not ready or not self._forwarding.is_set():
                    continue  # a stall that began during the select holds this too
                data = source.recv(_CHUNK)
                if not data:
                    sink.shutdown(socket.SHUT_WR)
                    return
                sink.sendall(data)
            except (OSError, ValueError):  # a socket closed under the pump
                return
