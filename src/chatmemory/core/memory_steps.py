"""What a window memory does, written once as steps without I/O, for the sync and the async memories.

Each operation of a window memory (``add``, ``messages``, ``set``, ``clear``) is a generator that yields
the store calls it needs — :class:`Load`, :class:`Save`, :class:`GetMessages`, ... — receives their
results, and has a conflicting :class:`Save` thrown back into it as a
:class:`~chatmemory.ConcurrentUpdateError`. It decides everything: the new window, what was evicted,
whether anything must be written, when to retry, how long to back off first, and when to stop retrying
and queue on the store's lock instead (:class:`Modify`). The sync memories run
the steps with plain calls (:func:`run_steps`); the async ones with ``await``
(:func:`chatmemory.aio.memory.run_steps_async`). A decision made here is made the same way by both.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from chatmemory.core.errors import ConcurrentUpdateError
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Change, ChatMemoryStore, Snapshot, SupportsLockedUpdate, SupportsVersioning
from chatmemory.core.window import MessageWeight, TotalWeight, WindowUpdate, add_messages, evict, fit_window
from chatmemory.stores.base.retry import RetryPolicy

__all__ = [
    "DeleteMessages",
    "GetMessages",
    "Load",
    "Modify",
    "Save",
    "Sleep",
    "Step",
    "Steps",
    "UpdateMessages",
    "WindowRules",
    "add_steps",
    "clear_steps",
    "messages_steps",
    "run_steps",
    "set_steps",
]

logger = logging.getLogger("chatmemory")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class GetMessages:
    """Read the stored messages (reply: ``list[ChatMessage]``)."""

    memory_id: str


@dataclass(frozen=True, slots=True)
class UpdateMessages:
    """Replace the stored messages unconditionally (reply: ``None``)."""

    memory_id: str
    messages: list[ChatMessage]


@dataclass(frozen=True, slots=True)
class DeleteMessages:
    """Delete the memory (reply: ``None``)."""

    memory_id: str


@dataclass(frozen=True, slots=True)
class Load:
    """Read the messages and their version (reply: :class:`~chatmemory.Snapshot`)."""

    memory_id: str


@dataclass(frozen=True, slots=True)
class Save:
    """Write if the memory is still at ``expected_version`` (reply: the new version).

    A conflict is thrown back into the steps as :class:`~chatmemory.ConcurrentUpdateError`.
    """

    memory_id: str
    messages: list[ChatMessage]
    expected_version: int


@dataclass(frozen=True, slots=True)
class Modify:
    """Apply ``change`` to the memory under the store's lock (reply: the version it is at afterwards).

    ``change`` is a pure function of the stored messages (see :class:`~chatmemory.SupportsLockedUpdate`);
    the executors hand it to ``store.modify`` as it is, the async one too.
    """

    memory_id: str
    change: Change


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait ``seconds`` before the next step (``time.sleep`` or ``asyncio.sleep``; reply: ``None``)."""

    seconds: float


Step = GetMessages | UpdateMessages | DeleteMessages | Load | Save | Modify | Sleep
Steps = Generator[Step, Any, T]
"""A memory operation: yields steps, receives their replies, returns its result."""


@dataclass(frozen=True, slots=True)
class WindowRules:
    """The window of one memory at one moment: its id, resolved limit, weights and system-message rule."""

    memory_id: str
    limit: int
    limit_name: str
    weight: MessageWeight
    total: TotalWeight | None
    always_keep_system_message_first: bool

    def add(self, stored: Sequence[ChatMessage], added: Sequence[ChatMessage]) -> WindowUpdate:
        """The window after appending ``added`` to ``stored`` and evicting down to the limit."""
        return add_messages(
            stored,
            added,
            limit=self.limit,
            weight=self.weight,
            total=self.total,
            always_keep_system_message_first=self.always_keep_system_message_first,
        )

    def fit(self, messages: Sequence[ChatMessage]) -> WindowUpdate:
        """The window replacing the stored one wholesale (``set``)."""
        return fit_window(
            messages,
            limit=self.limit,
            weight=self.weight,
            total=self.total,
            always_keep_system_message_first=self.always_keep_system_message_first,
        )

    def view(self, stored: list[ChatMessage]) -> list[ChatMessage]:
        """What ``messages()`` returns: the stored window, evicted to the current limit (a shrunk one too)."""
        _, window = evict(stored, self.limit, self.weight, self.total)
        return window

    def report(self, update: WindowUpdate) -> None:
        """Log a warning for each message that alone outweighs the whole limit."""
        for message in update.oversized:
            logger.warning(
                "memory %r: a %s of %d exceeds the whole %s of %d on its own; %s",
                self.memory_id,
                type(message).__name__,
                self.weight(message),
                self.limit_name,
                self.limit,
                "it is kept (system message)" if message in update.messages else "it was evicted",
            )


def add_steps(
    rules: WindowRules,
    added: Sequence[ChatMessage],
    *,
    versioned: bool,
    retry: RetryPolicy,
    max_attempts: int | None = None,
    locked: bool = False,
) -> Steps[WindowUpdate]:
    """Append ``added``: one read and at most one write, retried on a conflict.

    With a versioned store the write is conditional on the version read. A conflicting write is retried:

    * with ``locked`` (the store supports :class:`~chatmemory.SupportsLockedUpdate`), once, as one
      :class:`Modify` under the store's lock, which queues behind the other writers instead of racing them
      again, so heavy contention on one memory cannot exhaust the budget. The first attempt stays
      optimistic: uncontended adds keep their one read and one short write, and only an add that has
      seen contention pays for the lock;
    * otherwise from a fresh read, under ``retry`` (time budget, jittered backoff).

    Either way ``max_attempts``, when set, bounds the attempts (the locked one counts), and the window is
    decided by the same :meth:`WindowRules.add` on the messages read.

    Raises:
        ConcurrentUpdateError: the memory kept changing under other writers until the budget was spent.
    """
    memory_id = rules.memory_id
    if not versioned:
        stored: list[ChatMessage] = yield GetMessages(memory_id)
        update = rules.add(stored, added)
        if update.changed:
            yield UpdateMessages(memory_id, update.messages)
        rules.report(update)
        return update
    attempts = retry.start("memory.add")
    while True:
        snapshot: Snapshot = yield Load(memory_id)
        update = rules.add(snapshot.messages, added)
        if update.changed:
            try:
                yield Save(memory_id, update.messages, snapshot.version)
            except ConcurrentUpdateError:
                spent = max_attempts is not None and attempts.count >= max_attempts
                if locked and not spent:
                    update = yield from _add_locked(rules, added)
                    break
                delay = None if spent else attempts.backoff()
                if delay is None:
                    logger.warning(
                        "memory %r: add gave up after %d attempts: other writers kept changing it",
                        memory_id,
                        attempts.count,
                    )
                    raise ConcurrentUpdateError(memory_id, attempts=attempts.count) from None
                yield Sleep(delay)
                continue
        break
    # An unchanged window (an oversized message evicted at once) still deserves the warning.
    rules.report(update)
    return update


def _add_locked(rules: WindowRules, added: Sequence[ChatMessage]) -> Steps[WindowUpdate]:
    """The locked attempt of ``add``: the same window decision, made on what the store read under its lock."""
    decided: list[WindowUpdate] = []

    def change(stored: list[ChatMessage]) -> list[ChatMessage] | None:
        # The store may call this more than once; the last call is the one whose result it wrote.
        update = rules.add(stored, added)
        decided.append(update)
        return update.messages if update.changed else None

    yield Modify(rules.memory_id, change)
    if not decided:  # pragma: no cover - a store that breaks its contract
        raise AssertionError(f"{rules.memory_id!r}: the store's modify returned without calling the change")
    return decided[-1]


def messages_steps(rules: WindowRules) -> Steps[list[ChatMessage]]:
    """The current window, oldest first: one read, no write."""
    stored: list[ChatMessage] = yield GetMessages(rules.memory_id)
    return rules.view(stored)


def set_steps(rules: WindowRules, messages: Iterable[ChatMessage]) -> Steps[WindowUpdate]:
    """Replace the window with ``messages`` evicted to the limit: one write, no read.

    Raises:
        ValueError: ``messages`` holds more than one system message.
    """
    update = rules.fit(list(messages))
    rules.report(update)
    yield UpdateMessages(rules.memory_id, update.messages)
    return update


def clear_steps(memory_id: str) -> Steps[None]:
    """Delete the memory."""
    yield DeleteMessages(memory_id)


def _execute(store: ChatMemoryStore, step: Step) -> Any:
    if isinstance(step, Load):
        assert isinstance(store, SupportsVersioning)
        return store.load(step.memory_id)
    if isinstance(step, Save):
        assert isinstance(store, SupportsVersioning)
        return store.save(step.memory_id, step.messages, step.expected_version)
    if isinstance(step, Modify):
        assert isinstance(store, SupportsLockedUpdate)
        return store.modify(step.memory_id, step.change)
    if isinstance(step, GetMessages):
        return store.get_messages(step.memory_id)
    if isinstance(step, UpdateMessages):
        return store.update_messages(step.memory_id, step.messages)
    if isinstance(step, DeleteMessages):
        return store.delete_messages(step.memory_id)
    time.sleep(step.seconds)
    return None


def run_steps(steps: Steps[T], store: ChatMemoryStore) -> T:
    """Run a memory operation against a sync store; return its result.

    A :class:`~chatmemory.ConcurrentUpdateError` from a step goes back into the steps (they decide whether
    to retry); any other error ends them and propagates.
    """
    reply: Any = None
    conflict: ConcurrentUpdateError | None = None
    try:
        while True:
            try:
                step = steps.send(reply) if conflict is None else steps.throw(conflict)
            except StopIteration as stop:
                result: T = stop.value
                return result
            conflict = reply = None
            try:
                reply = _execute(store, step)
            except ConcurrentUpdateError as exc:
                conflict = exc
    finally:
        steps.close()
