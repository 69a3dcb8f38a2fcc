"""A TCP proxy on loopback that counts bytes and cuts connections at chosen points, for fault tests.

Each accepted connection is forwarded to the upstream server by two pump threads. A fault is armed for
the next bytes that flow: :meth:`TcpProxy.cut_upstream_after` forwards only ``n`` more bytes from client
to server and then closes both sides (the server sees a half-sent command); :meth:`TcpProxy.cut_reply`
lets the request through and closes both sides instead of forwarding the server's answer (the command
ran, the client never hears it); :meth:`TcpProxy.cut_downstream_after` forwards ``n`` bytes of the answer
first. :meth:`TcpProxy.cut_reply_to` cuts the reply on the connection whose request holds given bytes
only, for a client that talks to the server on connections of its own meanwhile (a driver's monitor,
whose heartbeat reply could otherwise take the cut meant for a command). A fault fires once;
connections made afterwards (a driver's retry) pass untouched.
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType

_CHUNK = 65536


class _Fault:
    def __init__(self, direction: str, after: int, request: bytes | None = None) -> None:
        self.direction = direction  # "up" (client -> server) or "down" (server -> client)
        self.remaining = after
        self.request = request  # only the reply on the connection that sends these bytes up next
        self.pair: tuple[socket.socket, socket.socket] | None = None  # that connection, once seen


class TcpProxy:
    """Forward ``127.0.0.1:<port>`` to ``upstream``; see the module docstring for faults."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        # accept() is not woken by close() from another thread: poll, so close() returns at once.
        self._listener.settimeout(0.05)
        self.host, self.port = self._listener.getsockname()[:2]
        self._lock = threading.Lock()
        self._fault: _Fault | None = None
        self._sockets: list[socket.socket] = []
        self._closed = False
        self.bytes_up = 0
        self.bytes_down = 0
        self.cuts = 0
        self._acceptor = threading.Thread(target=self._accept, name="tcp-proxy-accept", daemon=True)
        self._acceptor.start()

    # ------------------------------------------------------------------------------------ faults

    def cut_upstream_after(self, count: int) -> None:
        """Forward ``count`` more bytes client -> server, then close the connection."""
        with self._lock:
            self._fault = _Fault("up", count)

    def cut_downstream_after(self, count: int) -> None:
        """Forward ``count`` more bytes server -> client, then close the connection."""
        with self._lock:
            self._fault = _Fault("down", count)

    def cut_reply(self) -> None:
        """Close the connection instead of forwarding the next bytes the server sends."""
        self.cut_downstream_after(0)

    def cut_reply_to(self, request: bytes) -> None:
        """Close the connection instead of forwarding the reply to the next request holding ``request``.

        Replies on the other connections pass, as do the bytes before that request.
        """
        with self._lock:
            self._fault = _Fault("down", 0, request)

    @property
    def armed(self) -> bool:
        """Whether a fault is still waiting to fire."""
        with self._lock:
            return self._fault is not None

    def reset_counters(self) -> None:
        with self._lock:
            self.bytes_up = self.bytes_down = 0

    # ----------------------------------------------------------------------------------- pumping

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                if self._closed:
                    return
                continue
            except OSError:
                return
            client.settimeout(None)
            try:
                server = socket.create_connection(self._upstream)
            except OSError:
                client.close()
                continue
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._closed:
                    client.close()
                    server.close()
                    return
                self._sockets += [client, server]
            pair = (client, server)
            threading.Thread(target=self._pump, args=(client, server, "up", pair), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, "down", pair), daemon=True).start()

    def _pump(
        self, source: socket.socket, target: socket.socket, direction: str, pair: tuple[socket.socket, socket.socket]
    ) -> None:
        while True:
            try:
                data = source.recv(_CHUNK)
            except OSError:
                data = b""
            if not data:
                self._cut(pair)
                return
            cut = False
            with self._lock:
                fault = self._fault
                if fault is not None and fault.request is not None:
                    if fault.pair is None and direction == "up" and fault.request in data:
                        fault.pair = pair
                    if fault.pair is not pair:
                        fault = None
                if fault is not None and fault.direction == direction:
                    if len(data) >= fault.remaining:
                        data, cut = data[: fault.remaining], True
                        self._fault = None
                        self.cuts += 1
                    else:
                        fault.remaining -= len(data)
                if direction == "up":
                    self.bytes_up += len(data)
                else:
                    self.bytes_down += len(data)
            try:
                if data:
                    target.sendall(data)
            except OSError:
                cut = True
            if cut:
                self._cut(pair)
                return

    @staticmethod
    def _cut(pair: tuple[socket.socket, socket.socket]) -> None:
        for sock in pair:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    # --------------------------------------------------------------------------------- lifecycle

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sockets, self._sockets = self._sockets, []
        self._acceptor.join(timeout=5)
        self._listener.close()
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
