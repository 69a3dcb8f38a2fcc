"""A peer: another store on the same namespace, writing on a thread of its own while a test reads.

:class:`Peer` runs the peer's work once the reader has started, keeps what it raised, and fails a test
whose peer hangs. The ``peer_recipe`` fixture (``tests/stores/conftest.py``) gives each backend a peer
can share, in a fresh namespace.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

DEADLINE = 60.0
"""Seconds a test waits for its peer (a hang is a failure, not a stuck run)."""


class Peer:
    """``work`` on a thread of its own, from when the reader first asks :meth:`writing` until it returns."""

    def __init__(self, work: Callable[[], object]) -> None:
        self._work = work
        self._reading = threading.Event()
        self._done = threading.Event()
        self._failures: list[BaseException] = []
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        try:
            self._reading.wait(DEADLINE)
            self._work()
        except BaseException as exc:  # reported by the test's thread, in __exit__
            self._failures.append(exc)
        finally:
            self._done.set()

    def __enter__(self) -> Peer:
        self._thread.start()
        return self

    def writing(self) -> bool:
        """Whether the peer is still at work (the first call lets it begin)."""
        self._reading.set()
        return not self._done.is_set()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._reading.set()
        self._thread.join(DEADLINE)
        if exc is None:
            assert self._failures == [] and not self._thread.is_alive()
