"""Finding a server for a backend: an environment URL first, then a testcontainers container, else skip.

``CHATMEMORY_TEST_REQUIRE_SERVICES=1`` turns the skip into a failure, so CI can never pass with a backend
silently left out.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pytest

REQUIRE_SERVICES = os.environ.get("CHATMEMORY_TEST_REQUIRE_SERVICES", "") not in ("", "0", "false", "no")

_containers: list[Any] = []
_docker_answers: bool | None = None


def docker_answers() -> bool:
    """Whether a Docker engine answers ``GET /_ping`` (checked once per session, within 3 seconds)."""
    global _docker_answers
    if _docker_answers is None:
        _docker_answers = _ping_docker(os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"))
    return _docker_answers


def _ping_docker(host: str) -> bool:
    parsed = urlsplit(host)
    try:
        if parsed.scheme == "unix":
            if not os.path.exists(parsed.path):
                return False
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(3)
            target: Any = parsed.path
        elif parsed.scheme == "tcp" and parsed.hostname:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.settimeout(3)
            target = (parsed.hostname, parsed.port or 2375)
        else:
            return False
        with sock:
            sock.connect(target)
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            status_line = sock.recv(64).split(b"\r\n", 1)[0]
            return status_line.startswith(b"HTTP/1.") and b" 200" in status_line
    except OSError:
        return False


def unavailable(backend: str, env_var: str, example: str) -> None:
    """Skip (or, with CHATMEMORY_TEST_REQUIRE_SERVICES=1, fail) for want of a server."""
    message = (
        f"no {backend} server: set {env_var} (e.g. {env_var}={example}), or run a Docker engine for "
        "testcontainers, or `docker compose up -d` with the URLs from README.md"
    )
    if REQUIRE_SERVICES:
        pytest.fail(f"CHATMEMORY_TEST_REQUIRE_SERVICES=1 but {message}", pytrace=False)
    pytest.skip(message)


def server_url(
    backend: str,
    env_var: str,
    example: str,
    container: Callable[[], tuple[Any, str]] | None = None,
) -> str:
    """The URL of a server for ``backend``.

    Args:
        backend: a name for messages.
        env_var: the environment variable that names a running server.
        example: an example value, shown in the skip reason.
        container: starts a testcontainers container and returns it with its URL.
    """
    url = os.environ.get(env_var)
    if url:
        return url
    if container is not None and docker_answers():
        started, url = container()
        _containers.append(started)
        return url
    unavailable(backend, env_var, example)
    raise AssertionError("unreachable")


def stop_containers() -> None:
    """Stop every container this session started."""
    while _containers:
        _containers.pop().stop()
