"""Progress bars: drawn on a terminal (a pseudo-terminal here), never when piped or with ``--quiet``."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from chatmemory import UserMessage

pytestmark = pytest.mark.sqlite

BAR = "━"  # Rich's bar glyph


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "COLUMNS"}}
    env["TERM"] = "xterm-256color"
    return env


def on_a_terminal(argv: list[str]) -> tuple[int, str]:
    """Run ``python -m chatmemory argv`` with stdin, stdout and stderr on a 120x40 pseudo-terminal."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "chatmemory", *argv],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=environment(),
        close_fds=True,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return process.wait(timeout=120), b"".join(chunks).decode("utf-8", "replace")


def piped(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chatmemory", *argv],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=120,
        check=False,
    )


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    from chatmemory.stores.sql import SQLChatMemoryStore

    url = f"sqlite:///{tmp_path / 'chat.db'}"
    with SQLChatMemoryStore(url) as store:
        store.create_schema()
        for n in range(200):
            store.update_messages(f"user-{n}", [UserMessage(f"hello {n}")])
    return url


def test_export_draws_a_bar_on_a_terminal_only(sqlite_url: str, tmp_path: Path) -> None:
    out = str(tmp_path / "out.jsonl")
    status, screen = on_a_terminal(["export", sqlite_url, "-o", out])
    assert status == 0, screen
    assert "exporting" in screen
    assert BAR in screen
    assert "200/200" in screen
    assert "200 exported" in screen

    quiet_status, quiet_screen = on_a_terminal(["export", sqlite_url, "-o", out, "--quiet"])
    assert quiet_status == 0
    assert BAR not in quiet_screen
    assert quiet_screen.strip() == ""

    # Lines written to the terminal itself: no bar tearing through them.
    stdout_status, stdout_screen = on_a_terminal(["export", sqlite_url, "-o", "-"])
    assert stdout_status == 0
    assert BAR not in stdout_screen
    assert '{"id":"user-199"' in stdout_screen

    completed = piped(["export", sqlite_url, "-o", out])
    assert completed.returncode == 0
    assert BAR not in completed.stderr
    assert "\x1b[" not in completed.stderr  # no cursor movement or colour for a log file
    assert completed.stderr == f"chatmemory export: 200 exported ({out})\n"


def test_import_and_ls_bars_and_tables(sqlite_url: str, tmp_path: Path) -> None:
    out = str(tmp_path / "out.jsonl")
    assert piped(["export", sqlite_url, "-o", out, "-q"]).returncode == 0
    target = f"sqlite:///{tmp_path / 'target.db'}"
    assert piped(["migrate", target]).returncode == 0
    status, screen = on_a_terminal(["import", target, out])
    assert status == 0, screen
    assert "importing" in screen
    assert BAR in screen
    assert "200 created" in screen
    status, screen = on_a_terminal(["ls", target])
    assert status == 0
    assert "reading" in screen
    assert "user-199" in screen
    listed = piped(["ls", target])
    assert BAR not in listed.stderr
    assert len(listed.stdout.splitlines()) == 201
