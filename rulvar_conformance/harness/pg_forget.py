"""A PostgreSQL-aware loopback forwarder that makes the server forget prepared statements.

Poolers and operators do this behind a client's back: PgBouncer's reset query
(``DISCARD ALL``) when it hands a server connection to another client, an admin
or a maintenance job running ``DEALLOCATE ALL`` in the session. A store that
prepares statements must then prepare them again, not fail the call.

``ForgettingProxy(target)`` forwards ``127.0.0.1:<port>`` to ``target`` and
reads the protocol's message frames as they pass (it never changes one). After
``forget(sql)``, each connection open at that moment, at its next moment of rest
(the server's last ReadyForQuery said idle, every query and Sync the client
sent has been answered) and before the client's next message, gets one simple
``Query`` of its own, ``DEALLOCATE ALL`` by default: the server runs it in the
client's session, and the proxy swallows its replies through their
ReadyForQuery, so the client sees nothing but the statements it prepared gone.
``forgotten`` counts the injections the server ran, ``refused`` keeps the
errors of any it refused, and ``answers`` the first column of each row an
injected query returned (``ask(sql)`` injects a query to read the session's
state, such as its settings, the same way).

The proxy answers SSL and GSS encryption requests with "no" itself, so the
stream stays readable: a client that requires encryption cannot connect
through it (the check then does not run). Only loopback, only ``target``.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from dataclasses import dataclass, field
from typing import Final

__all__ = ["ForgettingProxy", "query_message"]

_CHUNK: Final = 65536
# Startup-phase request codes (the second int32 of an untyped first message).
_SSL_REQUEST: Final = 80877103
_GSSENC_REQUEST: Final = 80877104
_CANCEL_REQUEST: Final = 80877102
# Client messages the server answers with a ReadyForQuery: Query, Sync, FunctionCall.
_ANSWERED: Final = frozenset(b"QSF")


def query_message(sql: str) -> bytes:
    """A simple-protocol ``Query`` message carrying ``sql``."""
    body = sql.encode() + b"\0"
    return b"Q" + struct.pack("!i", len(body) + 4) + body


class _Frames:
    """Whole protocol messages (type byte, int32 length, body) out of a byte stream."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        out: list[bytes] = []
        while len(self._buffer) >= 5:
            end = 1 + int.from_bytes(self._buffer[1:5], "big")
            if len(self._buffer) < end:
                break  # a large message (a blob) is held until whole, then sent
            out.append(bytes(self._buffer[:end]))
            del self._buffer[:end]
        return out


@dataclass
class _Session:
    """One forwarded connection's view of the protocol, shared by its two pumps."""

    client: socket.socket
    server: socket.socket
    lock: threading.Lock = field(default_factory=threading.Lock)
    armed: bytes | None = None  # the Query to inject at the next rest
    # ReadyForQuery still owed to the client: one for the startup, one per
    # Query, Sync or FunctionCall it sent since.
    owed: int = 1
    idle: bool = False
    swallow: int = 0  # injected queries whose replies are not through yet


class ForgettingProxy:
    """Forward ``127.0.0.1:<port>`` to ``target``; ``forget()`` injects at rest."""

    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._sessions: list[_Session] = []
        self.forgotten = 0
        self.refused: list[str] = []
        self.answers: list[str | None] = []
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    @property
    def address(self) -> tuple[str, int]:
        """Where clients connect: ``("127.0.0.1", port)``."""
        host, port = self._listener.getsockname()[:2]
        return str(host), int(port)

    def forget(self, sql: str = "DEALLOCATE ALL") -> None:
        """Arm every open connection: ``sql`` runs in it at its next moment of rest."""
        message = query_message(sql)
        with self._lock:
            sessions = list(self._sessions)
        for session in sessions:
            with session.lock:
                session.armed = message

    def ask(self, sql: str) -> None:
        """Like ``forget``, for a query whose rows are kept in ``answers``."""
        self.forget(sql)

    def close(self) -> None:
        """Close the listener and every forwarded connection; join the pumps."""
        self._closed.set()
        # A shutdown wakes the accept() blocked on the listener (a close alone
        # does not on Linux, and the join below would wait out its timeout).
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            sessions = list(self._sessions)
        for session in sessions:
            _close_pair(session)
        for thread in list(self._threads):
            thread.join(timeout=5)

    def __enter__(self) -> ForgettingProxy:
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
            server.settimeout(None)
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            session = _Session(client, server)
            with self._lock:
                self._sessions.append(session)
            if self._closed.is_set():
                # close() ran while this connection was being made: its copy of
                # the list may have missed it, so it is closed here.
                _close_pair(session)
                return
            for pump in (self._from_client, self._from_server):
                thread = threading.Thread(target=pump, args=(session,), daemon=True)
                self._threads.append(thread)
                thread.start()

    def _from_client(self, session: _Session) -> None:
        try:
            if not self._startup(session):
                _pipe(session.client, session.server)  # a cancel request: bytes only
                return
            frames = _Frames()
            while data := session.client.recv(_CHUNK):
                messages = frames.feed(data)
                if not messages:
                    continue
                with session.lock:
                    inject = session.armed
                    if not (
                        session.idle and session.owed == 0 and session.swallow == 0
                    ):
                        inject = None
                    if inject is not None:
                        session.armed = None
                        session.swallow += 1
                    session.owed += sum(m[0] in _ANSWERED for m in messages)
                if inject is not None:
                    session.server.sendall(inject)
                session.server.sendall(b"".join(messages))
        except OSError:
            pass  # either side closed: stop
        finally:
            _close_pair(session)

    def _startup(self, session: _Session) -> bool:
        """Pass the untyped startup message on; refuse encryption; False for a cancel."""
        while True:
            head = _recv_exact(session.client, 8)
            length, code = struct.unpack("!ii", head)
            if code in (_SSL_REQUEST, _GSSENC_REQUEST):
                session.client.sendall(b"N")  # plaintext, so the frames stay readable
                continue
            session.server.sendall(head + _recv_exact(session.client, length - 8))
            return bool(code != _CANCEL_REQUEST)

    def _from_server(self, session: _Session) -> None:
        frames = _Frames()
        try:
            while data := session.server.recv(_CHUNK):
                passed: list[bytes] = []
                for message in frames.feed(data):
                    if self._swallowed(session, message):
                        continue
                    if message[:1] == b"Z":
                        with session.lock:
                            session.owed -= 1
                            session.idle = message[5:6] == b"I"
                    passed.append(message)
                if passed:
                    session.client.sendall(b"".join(passed))
        except OSError:
            pass  # either side closed: stop
        finally:
            _close_pair(session)

    def _swallowed(self, session: _Session, message: bytes) -> bool:
        """Whether ``message`` answers an injected query (counted, not forwarded)."""
        with session.lock:
            if session.swallow == 0:
                return False
            kind = message[:1]
            if kind == b"D":
                with self._lock:
                    self.answers.append(_first_column(message))
            elif kind in (b"C", b"E"):
                with self._lock:
                    if kind == b"C":
                        # An ``ask`` completes as SELECT: read, not forgotten.
                        self.forgotten += not message[5:].startswith(b"SELECT")
                    else:
                        text = message[5:].replace(b"\0", b" ")
                        self.refused.append(text.decode(errors="replace"))
            elif kind == b"Z":
                session.swallow -= 1
                session.idle = message[5:6] == b"I"
            return True


def _first_column(row: bytes) -> str | None:
    """The first value of a DataRow message (text format), ``None`` for SQL NULL."""
    if int.from_bytes(row[5:7], "big") == 0:
        return None
    size = int.from_bytes(row[7:11], "big", signed=True)
    return None if size < 0 else row[11 : 11 + size].decode(errors="replace")


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionResetError("closed during the startup message")
        data += chunk
    return data


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    while data := source.recv(_CHUNK):
        sink.sendall(data)


def _close_pair(session: _Session) -> None:
    for sock in (session.client, session.server):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
