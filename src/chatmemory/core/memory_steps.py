"""What a window memory does, written once as steps without I/O, for the sync and the async memories.

Each operation of a window memory (``add``, ``messages``, ``set``, ``clear``) is a generator that yields
the store calls it needs — :class:`Load`, :class:`Save`, :class:`GetMessages`, ... — receives their
results, and has a conflicting :class:`Save` thrown back into it as a
:class:`~chatmemory.ConcurrentUpdateError`. It decides everything: the new window, what was evicted,
whether anything must be written, when to retry, how long to back off first, when to stop retrying
and queue on the store's lock instead (:class:`Modify`), and when the application's functions run
(:class:`Notify` for ``on_evict``, :class:`Summarize` for a summarizer). The sync memories run
the steps with plain calls (:func:`run_steps`); the async ones with ``await``
(:func:`chatmemory.aio.memory.run_steps_async`). A decision made here is made the same way by both.
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast

from chatmemory.core.driving import Sleep, Steps, drive
from chatmemory.core.errors import ConcurrentUpdateError, MessageTooLargeError
from chatmemory.core.messages import AiMessage, ChatMessage, SystemMessage, ToolExecutionResultMessage
from chatmemory.core.recorded_writes import RecordedWindow, SupportsRecordedWrites, evicted_within
from chatmemory.core.retry import Attempts, RetryPolicy
from chatmemory.core.store import Change, ChatMemoryStore, Snapshot, SupportsLockedUpdate, SupportsVersioning
from chatmemory.core.window import (
    MessageWeight,
    StartOn,
    TotalWeight,
    WindowUpdate,
    add_messages,
    evict,
    fit_window,
)

__all__ = [
    "OVERSIZED_POLICIES",
    "DeleteMessages",
    "EvictHook",
    "GetMessages",
    "Load",
    "Modify",
    "Notify",
    "OversizedPolicy",
    "Save",
    "Sleep",
    "Step",
    "Steps",
    "Summarize",
    "Summarizer",
    "UpdateMessages",
    "WindowRules",
    "add_steps",
    "call_hook",
    "hook_failed",
    "clear_steps",
    "messages_steps",
    "pop_range",
    "pop_steps",
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
    ``also_recorded``: messages the store's history records before what the write appends (sent only
    to a :class:`~chatmemory.core.recorded_writes.SupportsRecordedWrites` store, with ``save_recorded``).
    """

    memory_id: str
    messages: list[ChatMessage]
    expected_version: int
    also_recorded: tuple[ChatMessage, ...] = ()


@dataclass(frozen=True, slots=True)
class Modify:
    """Apply ``change`` to the memory under the store's lock (reply: the version it is at afterwards).

    ``change`` is a pure function of the stored messages (see :class:`~chatmemory.SupportsLockedUpdate`);
    the executors hand it to ``store.modify`` as it is, the async one too.
    """

    memory_id: str
    change: Change


EvictHook = Callable[[str, list[ChatMessage]], Any]
"""``on_evict(memory_id, evicted_messages)``: a plain function, or (asyncio memories) a coroutine function."""
Summarizer = Callable[[str | None, list[ChatMessage]], Any]
"""``summarizer(previous_summary, evicted_messages) -> str``: plain, or (asyncio memories) a coroutine function."""
OversizedPolicy = Literal["evict", "raise"]
OVERSIZED_POLICIES: tuple[str, ...] = ("evict", "raise")


@dataclass(frozen=True, slots=True)
class Notify:
    """Call ``on_evict(memory_id, evicted)`` after a write succeeded (reply: ``None``).

    An exception from the hook propagates unchanged from the operation, whose write is already done
    (see :func:`call_hook`).
    """

    hook: EvictHook
    memory_id: str
    evicted: list[ChatMessage]


@dataclass(frozen=True, slots=True)
class Summarize:
    """Call ``summarizer(previous, evicted)`` (reply: the new summary text)."""

    summarizer: Summarizer
    memory_id: str
    previous: str | None
    evicted: list[ChatMessage]


Step = GetMessages | UpdateMessages | DeleteMessages | Load | Save | Modify | Sleep | Notify | Summarize


@dataclass(frozen=True, slots=True)
class WindowRules:
    """The window of one memory at one moment: its id, resolved limit, weights and system-message rule."""

    memory_id: str
    limit: int
    limit_name: str
    weight: MessageWeight
    total: TotalWeight | None
    always_keep_system_message_first: bool
    on_evict: EvictHook | None = None
    on_oversized: OversizedPolicy = "evict"
    start_on: StartOn = "any"

    @property
    def unit(self) -> str:
        """What the limit counts (``"tokens"``, ``"messages"``), for messages and errors."""
        return self.limit_name.removeprefix("max_")

    def refuse_oversized(self, added: Sequence[ChatMessage]) -> None:
        """With ``on_oversized="raise"``, refuse ``added`` if one of them alone outweighs the whole limit.

        Checked before any I/O: whether a message fits the limit does not depend on what is stored.

        Raises:
            MessageTooLargeError: the first such message, naming its size and the limit.
        """
        if self.on_oversized != "raise":
            return
        for message in added:
            size = self.weight(message)
            if size > self.limit:
                raise MessageTooLargeError(self.memory_id, size, self.limit, self.unit)

    def notify(self, update: WindowUpdate) -> Steps[Step, None]:
        """Hand what ``update`` evicted to ``on_evict``, once, if anything was evicted and a hook is set.

        Run after the operation whose result ``update`` is: after its write succeeded, or when nothing
        needed writing (an oversized message evicted at once still reaches the hook).
        """
        if self.on_evict is not None and update.evicted:
            yield Notify(self.on_evict, self.memory_id, list(update.evicted))

    def add(self, stored: Sequence[ChatMessage], added: Sequence[ChatMessage]) -> WindowUpdate:
        """The window after appending ``added`` to ``stored`` and evicting down to the limit."""
        return add_messages(
            stored,
            added,
            limit=self.limit,
            weight=self.weight,
            total=self.total,
            always_keep_system_message_first=self.always_keep_system_message_first,
            start_on=self.start_on,
        )

    def fit(self, messages: Sequence[ChatMessage]) -> WindowUpdate:
        """The window replacing the stored one wholesale (``set``)."""
        return fit_window(
            messages,
            limit=self.limit,
            weight=self.weight,
            total=self.total,
            always_keep_system_message_first=self.always_keep_system_message_first,
            start_on=self.start_on,
        )

    def view(self, stored: list[ChatMessage]) -> list[ChatMessage]:
        """What ``messages()`` returns: the stored window, evicted to the current limit (a shrunk one too)."""
        _, window = evict(stored, self.limit, self.weight, self.total, self.start_on)
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
    contended: bool = False,
    recorded: bool = False,
) -> Steps[Step, WindowUpdate]:
    """Append ``added``: one read and at most one write, retried on a conflict.

    With ``recorded`` (the store keeps a history and records writes' extra messages, see
    :class:`~chatmemory.core.recorded_writes.SupportsRecordedWrites`), the messages of ``added`` that the
    add evicts at once go to the history with the write, before what it appends to the window; such an
    add writes even when the window stays as it was (an oversized message evicted at once).

    With a versioned store the write is conditional on the version read. A conflicting write is retried:

    * with ``locked`` (the store supports :class:`~chatmemory.SupportsLockedUpdate`), once, as one
      :class:`Modify` under the store's lock, which queues behind the other writers instead of racing them
      again, so heavy contention on one memory cannot exhaust the budget. The first attempt stays
      optimistic: uncontended adds keep their one read and one short write, and only an add that has
      seen contention pays for the lock. A ``contended`` memory (the store's writers queued for it lately,
      see :class:`~chatmemory.SupportsContentionHint`) takes the lock at once: its optimistic write would
      only make the writers ahead of it conflict again;
    * otherwise from a fresh read, under ``retry`` (time budget, jittered backoff).

    Either way ``max_attempts``, when set, bounds the attempts (the locked one counts), and the window is
    decided by the same :meth:`WindowRules.add` on the messages read.

    The result's ``evicted`` is what the write that succeeded evicted (never what an attempt that lost a
    conflict would have): the memory hands it to ``on_evict`` with :meth:`WindowRules.notify` once it has
    released its turn, so a hook may add to the same memory.

    Raises:
        ConcurrentUpdateError: the memory kept changing under other writers until the budget was spent.
        MessageTooLargeError: ``on_oversized="raise"`` and a message alone outweighs the limit; nothing
            was read or written.
    """
    memory_id = rules.memory_id
    rules.refuse_oversized(added)
    if not versioned:
        stored: list[ChatMessage] = yield GetMessages(memory_id)
        update = rules.add(stored, added)
        if update.changed:
            yield UpdateMessages(memory_id, update.messages)
        rules.report(update)
        return update
    if locked and contended:
        update = yield from _add_locked(rules, added, recorded)
        rules.report(update)
        return update
    started = time.monotonic()
    attempts: Attempts | None = None  # made at the first conflict: most adds never meet one
    while True:
        snapshot: Snapshot = yield Load(memory_id)
        update = rules.add(snapshot.messages, added)
        unheard = evicted_within(added, update.evicted) if recorded else ()
        if update.changed or unheard:
            try:
                yield Save(memory_id, update.messages, snapshot.version, unheard)
            except ConcurrentUpdateError:
                if attempts is None:
                    attempts = retry.start("memory.add", started=started)
                spent = max_attempts is not None and attempts.count >= max_attempts
                if locked and not spent:
                    update = yield from _add_locked(rules, added, recorded)
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


def _add_locked(rules: WindowRules, added: Sequence[ChatMessage], recorded: bool = False) -> Steps[Step, WindowUpdate]:
    """The locked attempt of ``add``: the same window decision, made on what the store read under its lock."""
    decided: list[WindowUpdate] = []

    def change(stored: list[ChatMessage]) -> list[ChatMessage] | RecordedWindow | None:
        # The store may call this more than once; the last call is the one whose result it wrote.
        update = rules.add(stored, added)
        decided.append(update)
        unheard = evicted_within(added, update.evicted) if recorded else ()
        if unheard:
            return RecordedWindow(update.messages, unheard)
        return update.messages if update.changed else None

    yield Modify(rules.memory_id, change)
    if not decided:  # pragma: no cover - a store that breaks its contract
        raise AssertionError(f"{rules.memory_id!r}: the store's modify returned without calling the change")
    return decided[-1]


def messages_steps(rules: WindowRules) -> Steps[Step, list[ChatMessage]]:
    """The current window, oldest first: one read, no write."""
    stored: list[ChatMessage] = yield GetMessages(rules.memory_id)
    return rules.view(stored)


def set_steps(rules: WindowRules, messages: Iterable[ChatMessage]) -> Steps[Step, WindowUpdate]:
    """Replace the window with ``messages`` evicted to the limit: one write, no read.

    ``on_evict`` receives the messages of ``messages`` that did not fit, after the write.

    Raises:
        ValueError: ``messages`` holds more than one system message.
        MessageTooLargeError: ``on_oversized="raise"`` and a message alone outweighs the limit; nothing
            was written.
    """
    messages = list(messages)
    rules.refuse_oversized(messages)
    update = rules.fit(messages)
    rules.report(update)
    yield UpdateMessages(rules.memory_id, update.messages)
    yield from rules.notify(update)
    return update


def pop_range(window: Sequence[ChatMessage], keep: Callable[[ChatMessage], bool] | None = None) -> list[int]:
    """The indices ``pop`` removes from ``window``: the newest message, or the newest tool exchange.

    * The newest message that is not kept (never a system message, nor one ``keep`` protects) goes.
    * If it is a tool result, the AI message that asked for it goes too, with everything after that AI
      message (its other results, and anything between), so the window stays a valid prompt: the AI
      message is the nearest earlier one whose requests carry the result's id (or, for a result without
      an id, the nearest earlier one that asked for tools).
    * Nothing to pop (an empty window, or only protected messages): ``[]``.
    """

    def protected(message: ChatMessage) -> bool:
        return isinstance(message, SystemMessage) or (keep is not None and keep(message))

    newest = next((i for i in range(len(window) - 1, -1, -1) if not protected(window[i])), None)
    if newest is None:
        return []
    result = window[newest]
    if not isinstance(result, ToolExecutionResultMessage):
        return [newest]
    start = newest
    for index in range(newest - 1, -1, -1):
        message = window[index]
        if isinstance(message, AiMessage) and message.tool_execution_requests:
            ids = {request.id for request in message.tool_execution_requests}
            if result.id is None or result.id in ids:
                start = index
                break
    return [i for i in range(start, len(window)) if not protected(window[i])]


def pop_steps(
    rules: WindowRules,
    *,
    versioned: bool,
    keep: Callable[[ChatMessage], bool] | None = None,
) -> Steps[Step, list[ChatMessage]]:
    """Remove and return the newest message (or tool exchange, see :func:`pop_range`): one read, one write.

    With a versioned store the write is conditional on the version read, and a conflict is *not* retried:
    the newest message may now be someone else's, so popping again could undo a message the caller never
    saw. Nothing is written when there is nothing to pop.

    Raises:
        ConcurrentUpdateError: another writer changed the memory between the read and the write; nothing
            was removed.
    """
    memory_id = rules.memory_id
    if versioned:
        snapshot: Snapshot = yield Load(memory_id)
        stored, version = snapshot.messages, snapshot.version
    else:
        stored = yield GetMessages(memory_id)
        version = None
    doomed = pop_range(stored, keep)
    if not doomed:
        return []
    gone = set(doomed)
    popped = [stored[i] for i in doomed]
    remaining = [message for i, message in enumerate(stored) if i not in gone]
    if version is None:
        yield UpdateMessages(memory_id, remaining)
    else:
        try:
            yield Save(memory_id, remaining, version)
        except ConcurrentUpdateError:
            raise ConcurrentUpdateError(memory_id, expected_version=version) from None
    return popped


def clear_steps(memory_id: str) -> Steps[Step, None]:
    """Delete the memory."""
    yield DeleteMessages(memory_id)


def call_hook(step: Notify | Summarize) -> Any:
    """Call the application function of ``step``; return what it returns (maybe an awaitable).

    An exception from ``on_evict`` propagates unchanged (so the application's own ``except`` clauses keep
    working), after a note (Python 3.11+) saying that the memory's write is done: the hook runs only
    after it succeeded, so the caller must not add the messages again. An exception from a summarizer
    propagates before anything is written.
    """
    try:
        if isinstance(step, Notify):
            return step.hook(step.memory_id, list(step.evicted))
        return step.summarizer(step.previous, list(step.evicted))
    except Exception as exc:
        hook_failed(exc, step)
        raise


def hook_failed(exc: BaseException, step: Notify | Summarize) -> None:
    """Add to ``exc`` a note saying which function of which memory raised it, and whether anything was written."""
    add_note = getattr(exc, "add_note", None)  # Python 3.11+
    if add_note is None:
        return
    if isinstance(step, Notify):
        add_note(
            f"raised by on_evict of memory {step.memory_id!r}, after the write succeeded: the messages are "
            "stored; do not add them again"
        )
    else:
        add_note(f"raised by the summarizer of memory {step.memory_id!r}; nothing was written")


def _call_sync(step: Notify | Summarize) -> Any:
    result = call_hook(step)
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()
        what = "on_evict" if isinstance(step, Notify) else "the summarizer"
        raise TypeError(
            f"{what} of memory {step.memory_id!r} returned an awaitable: a sync memory calls it without "
            "awaiting; pass a plain function, or use the memory of chatmemory.aio"
        )
    return result


def _execute(store: ChatMemoryStore, step: Step) -> Any:
    if isinstance(step, (Notify, Summarize)):
        return _call_sync(step)
    # The memory yields Load, Save and Modify only for a store it found able to run them when it was
    # built: no isinstance against a runtime protocol here (microseconds per step, on every turn).
    if isinstance(step, Load):
        return cast("SupportsVersioning", store).load(step.memory_id)
    if isinstance(step, Save):
        if step.also_recorded:
            return cast("SupportsRecordedWrites", store).save_recorded(
                step.memory_id, step.messages, step.expected_version, step.also_recorded
            )
        return cast("SupportsVersioning", store).save(step.memory_id, step.messages, step.expected_version)
    if isinstance(step, Modify):
        return cast("SupportsLockedUpdate", store).modify(step.memory_id, step.change)
    if isinstance(step, GetMessages):
        return store.get_messages(step.memory_id)
    if isinstance(step, UpdateMessages):
        return store.update_messages(step.memory_id, step.messages)
    if isinstance(step, DeleteMessages):
        return store.delete_messages(step.memory_id)
    time.sleep(step.seconds)
    return None


def run_steps(steps: Steps[Step, T], store: ChatMemoryStore) -> T:
    """Run a memory operation against a sync store with :func:`~chatmemory.core.driving.drive`; return its result.

    A store's error goes back into the steps at the ``yield`` (they retry a
    :class:`~chatmemory.ConcurrentUpdateError` as they decide; anything else propagates from them); the
    steps are closed on every exit, an interrupt too.
    """
    try:
        return drive(steps, functools.partial(_execute, store))
    finally:
        steps.close()
