"""A cluster command sent again after redis-py's own redirections ran out (``TTL exhausted``).

redis-py's cluster client follows ``MOVED`` and ``ASK`` and retries ``TRYAGAIN`` itself, 16 times within
about 0.4 s. ``TRYAGAIN`` lasts as long as a migrating slot holds some of a script's keys on each node,
which for a slot of many keys moved a batch at a time (``redis-cli --cluster reshard`` moves 10 keys per
``MIGRATE``) can be longer; redis-py then raises ``ClusterError('TTL exhausted.')``. The command is sent
again after a pause, for up to :data:`RESEND_FOR` seconds: safe for a write, whose write id makes the
script recognise a run that had landed (none had: a refused command does not run).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from chatmemory.stores.redis.sending import Request, send, send_async

from redis.exceptions import ClusterError  # isort: skip - after sending.py checked that the extra is installed

__all__ = ["RESEND_FOR", "send_resending", "send_resending_async"]

RESEND_PAUSE = 0.1
RESEND_FOR = 5.0
"""Seconds a command refused while its slot migrates is sent again for."""


def _exhausted(exc: ClusterError, started: float) -> bool:
    """Whether ``exc`` is redis-py giving up on redirections, with time left to send again."""
    return "TTL exhausted" in str(exc) and time.monotonic() - started < RESEND_FOR


def send_resending(client: Any, command: Request) -> Any:
    """:func:`~.sending.send`, sent again while redis-py's redirections run out."""
    started = time.monotonic()
    while True:
        try:
            return send(client, command)
        except ClusterError as exc:
            if not _exhausted(exc, started):
                raise
        time.sleep(RESEND_PAUSE)


async def send_resending_async(client: Any, command: Request) -> Any:
    """:func:`~.sending.send_async`, sent again while redis-py's redirections run out."""
    started = time.monotonic()
    while True:
        try:
            return await send_async(client, command)
        except ClusterError as exc:
            if not _exhausted(exc, started):
                raise
        await asyncio.sleep(RESEND_PAUSE)
