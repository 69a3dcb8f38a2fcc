"""The fault proxy's cuts land on the connection they are meant for (the fault tests rely on it)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from support.tcp_proxy import TcpProxy


@pytest.fixture
def echo_proxy() -> Iterator[TcpProxy]:
    """A proxy in front of a loopback server that answers each request with its bytes."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def answer(connection: socket.socket) -> None:
        with connection:
            while data := connection.recv(1024):
                connection.sendall(data)

    def serve() -> None:
        server.settimeout(0.05)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=answer, args=(connection,), daemon=True).start()

    serving = threading.Thread(target=serve, daemon=True)
    serving.start()
    with TcpProxy("127.0.0.1", server.getsockname()[1]) as proxy:
        yield proxy
    stop.set()
    serving.join()
    server.close()


def _connect(proxy: TcpProxy) -> socket.socket:
    client = socket.create_connection((proxy.host, proxy.port))
    client.settimeout(5)
    return client


def _ask(client: socket.socket, request: bytes) -> bytes:
    """Send ``request``; return the reply, or ``b""`` when the proxy closed the connection instead."""
    client.sendall(request)
    try:
        return client.recv(1024)
    except ConnectionResetError:
        return b""


def test_cut_reply_to_spares_the_replies_on_other_connections(echo_proxy: TcpProxy) -> None:
    monitor, command = _connect(echo_proxy), _connect(echo_proxy)
    with monitor, command:
        echo_proxy.cut_reply_to(b"update")
        assert _ask(monitor, b"hello") == b"hello"  # another connection's traffic comes first
        assert _ask(command, b"ping") == b"ping"  # this connection's request before the one named
        assert _ask(command, b"update chat") == b""
        assert echo_proxy.cuts == 1
        assert not echo_proxy.armed
        assert _ask(monitor, b"hello again") == b"hello again"


def test_cut_reply_takes_the_next_reply_on_any_connection(echo_proxy: TcpProxy) -> None:
    # Why the command faults name their request: a monitor's reply that comes first takes the cut.
    monitor, command = _connect(echo_proxy), _connect(echo_proxy)
    with monitor, command:
        echo_proxy.cut_reply()
        assert _ask(monitor, b"hello") == b""
        assert _ask(command, b"update chat") == b"update chat"
