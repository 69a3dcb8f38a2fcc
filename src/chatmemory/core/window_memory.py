"""What the sync and the async window memories share: their options, validated once, and the two kinds.

:class:`MessageWindowBase` and :class:`TokenWindowBase` take the constructor arguments of
``MessageWindowChatMemory`` and ``TokenWindowChatMemory`` and build the :class:`WindowRules` of each
operation; the sync classes (:mod:`chatmemory.core.memory`) and the async ones (:mod:`chatmemory.aio`)
only add the I/O. Bad arguments fail here, at construction, with what to pass instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import Generic, Protocol, TypeVar, runtime_checkable

from chatmemory.core.errors import install_hint
from chatmemory.core.lru import LRU
from chatmemory.core.memory_steps import (
    OVERSIZED_POLICIES,
    EvictHook,
    OversizedPolicy,
    Step,
    Steps,
    WindowRules,
    add_steps,
    messages_steps,
    pop_steps,
    set_steps,
)
from chatmemory.core.messages import ChatMessage
from chatmemory.core.recorded_writes import SupportsRecordedWrites
from chatmemory.core.retry import RetryPolicy
from chatmemory.core.store import (
    MemoryId,
    SupportsContentionHint,
    SupportsLockedUpdate,
    SupportsVersioning,
    validate_memory_id,
)
from chatmemory.core.token_estimators import SimpleTokenCountEstimator, TokenCountEstimator
from chatmemory.core.tokens.framing import FramedEstimator
from chatmemory.core.window import (
    FixedOverhead,
    MessageWeight,
    StartOn,
    TotalWeight,
    WindowUpdate,
    check_start_on,
    count_one,
)

__all__ = [
    "Limit",
    "MessageWindowBase",
    "SupportsEstimateMessages",
    "TokenWindowBase",
    "WindowMemoryBase",
    "check_callback",
    "check_estimator",
    "check_store",
    "resolve_limit",
]

Limit = int | Callable[[], int]
"""A window limit, or a callable returning it (read on every operation)."""

StoreT = TypeVar("StoreT")

_STORE_METHODS = ("get_messages", "update_messages", "delete_messages")


@runtime_checkable
class SupportsEstimateMessages(Protocol):
    """An estimator that counts a whole window, when it is not the sum of its messages.

    A per-request overhead is the usual reason. The token window calls it once per operation for the
    total and takes the difference to the sum of the messages as fixed while it evicts.
    """

    def estimate_messages(self, messages: Sequence[ChatMessage]) -> int:
        """Tokens that ``messages`` take in a prompt, all together."""
        ...


def window_estimator(
    given: TokenCountEstimator | None, cache_size: int | None
) -> tuple[TokenCountEstimator, SimpleTokenCountEstimator | None]:
    """The estimator a token window counts with, and the same one if the memory made it to keep its counts.

    ``given`` is checked and used as it is (its counts go through the memory's LRU: other memories may
    share it). With none given, the memory makes a ``SimpleTokenCountEstimator``; when ``cache_size`` is a
    positive number that estimator keeps the counts itself (the second value). With none kept (``0``) or
    no bound (``None``), a default one counts behind the memory's own LRU, as a given one would.
    """
    if given is not None:
        return check_estimator(given), None
    if cache_size is None or isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size <= 0:
        return SimpleTokenCountEstimator(), None
    own = SimpleTokenCountEstimator(cache_size=cache_size)
    return own, own


def counted_weight(
    estimator: TokenCountEstimator, own: SimpleTokenCountEstimator | None, through_cache: MessageWeight
) -> MessageWeight:
    """How a token window weighs one message: each distinct message counted once.

    The estimator the memory made itself (``own``: none was given, and it keeps as many counts as the
    memory's ``cache_size``) keeps the counts: a hit is one dictionary look-up, without a lock. An
    estimator given to the memory may be shared by many memories and keep few counts or none, so it is
    asked ``through_cache``, the memory's own LRU of counts.
    """
    return own.estimate_message if own is not None and estimator is own else through_cache


def request_total(estimator: TokenCountEstimator, weight: MessageWeight) -> TotalWeight | None:
    """The estimator's weight of a whole request (``estimate_messages``), if it has one.

    A framed estimator's (one of this package's, its ``estimate_messages`` not replaced) is its messages'
    counts plus ``reply_priming``: a :class:`~chatmemory.core.window.FixedOverhead` over ``weight``, the
    memory's count of one message, which gives the same counts.
    """
    total = getattr(estimator, "estimate_messages", None)
    if isinstance(estimator, FramedEstimator) and getattr(total, "__func__", None) is FramedEstimator.estimate_messages:
        return FixedOverhead(estimator.reply_priming, weight)
    return total if callable(total) else None


def resolve_limit(limit: Limit, name: str) -> int:
    """The limit now: ``limit`` itself, or what the callable returns.

    Raises:
        TypeError: the limit is not an int.
        ValueError: the limit is not above zero.
    """
    value = limit() if callable(limit) else limit
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int (or a callable returning one), not {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def check_store(store: object, *, asyncio: bool, memory_class: str) -> None:
    """Refuse what cannot be a memory's store, saying what to pass instead.

    Args:
        store: the ``store`` argument.
        asyncio: whether the memory is one of :mod:`chatmemory.aio` (and needs coroutine methods).
        memory_class: the memory's class name, for the message.

    Raises:
        TypeError: ``store`` is a URL string, lacks the store methods, or is of the other I/O style.
    """
    package = "chatmemory.aio" if asyncio else "chatmemory"
    if isinstance(store, str):
        raise TypeError(
            f"{memory_class}(store=...) takes a store object, not a URL; open the store once and pass it: "
            f"store = {package}.open_store({store!r})"
        )
    missing = [name for name in _STORE_METHODS if not callable(getattr(store, name, None))]
    if missing:
        raise TypeError(
            f"{memory_class}(store=...) needs a ChatMemoryStore ({', '.join(_STORE_METHODS)}); "
            f"{type(store).__name__} has no {', '.join(missing)}"
        )
    is_async = inspect.iscoroutinefunction(getattr(store, "get_messages"))  # noqa: B009 - checked above
    if is_async and not asyncio:
        raise TypeError(
            f"{type(store).__name__} is an asyncio store: use it with chatmemory.aio.{memory_class}, "
            f"or give {memory_class} a sync store (chatmemory.open_store(url))"
        )
    if asyncio and not is_async:
        raise TypeError(
            f"{type(store).__name__} is a sync store: chatmemory.aio.{memory_class} needs an asyncio store "
            "(chatmemory.aio.open_store(url), or a class from chatmemory.aio.stores)"
        )


def check_callback(function: object, name: str, *, asyncio: bool, memory_class: str) -> None:
    """Refuse a ``function`` argument (``on_evict``, ``summarizer``) that the memory could not call.

    A sync memory calls it without awaiting, so a coroutine function is refused there; an asyncio memory
    takes a coroutine function or a plain one.

    Raises:
        TypeError: ``function`` is not callable, or is a coroutine function given to a sync memory.
    """
    if not callable(function):
        raise TypeError(f"{memory_class}({name}=...) takes a function, not {type(function).__name__}")
    if not asyncio and inspect.iscoroutinefunction(function):
        raise TypeError(
            f"{memory_class}({name}=...) got a coroutine function, which a sync memory cannot await: pass a "
            f"plain function, or use chatmemory.aio.{memory_class}"
        )


def _check_oversized(policy: object) -> OversizedPolicy:
    if policy == "evict":
        return "evict"
    if policy == "raise":
        return "raise"
    raise ValueError(f"on_oversized must be one of {', '.join(map(repr, OVERSIZED_POLICIES))}, got {policy!r}")


def check_estimator(estimator: object) -> TokenCountEstimator:
    """The ``token_count_estimator`` argument, if it is one.

    Raises:
        TypeError: a model name, or an object without ``estimate_message``, saying what to pass instead.
    """
    if isinstance(estimator, str):
        raise TypeError(
            f"token_count_estimator takes an estimator object, not the string {estimator!r}; for an OpenAI "
            f"model use OpenAITokenCountEstimator(model={estimator!r}) (offline, the 'openai-tokens' extra: "
            f"{install_hint('openai-tokens')}) or TiktokenTokenCountEstimator({estimator!r})"
        )
    if not isinstance(estimator, TokenCountEstimator):
        raise TypeError(
            "token_count_estimator needs an estimate_message(message) -> int method (e.g. "
            f"SimpleTokenCountEstimator() or OpenAITokenCountEstimator()), not {type(estimator).__name__}"
        )
    return estimator


class WindowMemoryBase(Generic[StoreT]):
    """The options every window memory has; the I/O classes set the default store and check the store."""

    _limit_name = "limit"
    _asyncio = False

    def _setup(
        self,
        id: MemoryId,
        store: StoreT | None,
        limit: Limit,
        always_keep_system_message_first: bool,
        retry: RetryPolicy | None,
        max_attempts: int | None,
        on_evict: EvictHook | None = None,
        on_oversized: OversizedPolicy = "evict",
        start_on: StartOn = "any",
    ) -> None:
        self._id = validate_memory_id(id)
        if store is None:
            store = self._default_store()
        else:
            check_store(store, asyncio=self._asyncio, memory_class=type(self).__name__)
        self._store: StoreT = store
        self._versioned = isinstance(store, SupportsVersioning)
        # A conflicting add queues on the store's lock when it has one of this memory's I/O style.
        self._locked = (
            self._versioned
            and isinstance(store, SupportsLockedUpdate)
            and inspect.iscoroutinefunction(store.modify) == self._asyncio
        )
        # A store that records what an add evicts at once (its history holds every message written).
        self._recorded = (
            self._versioned
            and isinstance(store, SupportsRecordedWrites)
            and bool(store.keeps_history)
            and inspect.iscoroutinefunction(store.save_recorded) == self._asyncio
        )
        self._contention: SupportsContentionHint | None = (
            store if self._locked and isinstance(store, SupportsContentionHint) else None
        )
        if not callable(limit):
            resolve_limit(limit, self._limit_name)
        self._limit = limit
        self.always_keep_system_message_first = always_keep_system_message_first
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise TypeError(f"retry takes a RetryPolicy (e.g. RetryPolicy(budget=10.0)), not {type(retry).__name__}")
        self.retry = retry if retry is not None else RetryPolicy()
        if max_attempts is not None and (isinstance(max_attempts, bool) or not isinstance(max_attempts, int)):
            raise TypeError(f"max_attempts must be an int or None, not {type(max_attempts).__name__}")
        if max_attempts is not None and max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1 or None (retry for the whole budget), got {max_attempts}")
        self.max_attempts = max_attempts
        if on_evict is not None:
            check_callback(on_evict, "on_evict", asyncio=self._asyncio, memory_class=type(self).__name__)
        self.on_evict = on_evict
        self.on_oversized: OversizedPolicy = _check_oversized(on_oversized)
        self.start_on: StartOn = check_start_on(start_on)
        self._init_io()

    def _init_io(self) -> None:
        """Set up what the I/O style needs beside the options (the lock ``add`` takes turns on)."""

    def _default_store(self) -> StoreT:
        raise NotImplementedError

    @property
    def id(self) -> str:
        """The memory id."""
        return self._id

    @property
    def store(self) -> StoreT:
        """The store this memory reads and writes."""
        return self._store

    def _weight(self) -> MessageWeight:
        raise NotImplementedError

    def _total(self) -> TotalWeight | None:
        return None

    def _rules(self) -> WindowRules:
        return WindowRules(
            memory_id=self._id,
            limit=resolve_limit(self._limit, self._limit_name),
            limit_name=self._limit_name,
            weight=self._weight(),
            total=self._total(),
            always_keep_system_message_first=self.always_keep_system_message_first,
            on_evict=self.on_evict,
            on_oversized=self.on_oversized,
            start_on=self.start_on,
        )

    # The steps of each operation; the sync and async I/O classes run them, a memory kind may replace them.

    def _add_steps(self, rules: WindowRules, messages: Sequence[ChatMessage]) -> Steps[Step, WindowUpdate]:
        return add_steps(
            rules,
            messages,
            versioned=self._versioned,
            retry=self.retry,
            max_attempts=self.max_attempts,
            locked=self._locked,
            contended=self._contention is not None and self._contention.contended(self._id),
            recorded=self._recorded,
        )

    def _messages_steps(self, rules: WindowRules) -> Steps[Step, list[ChatMessage]]:
        return messages_steps(rules)

    def _set_steps(self, rules: WindowRules, messages: Iterable[ChatMessage]) -> Steps[Step, WindowUpdate]:
        return set_steps(rules, messages)

    def _pop_steps(self, rules: WindowRules) -> Steps[Step, list[ChatMessage]]:
        return pop_steps(rules, versioned=self._versioned)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self._id!r}, {self._limit_name}={self._limit!r}, store={self._store!r})"


class MessageWindowBase(WindowMemoryBase[StoreT]):
    """The message window's options: the last ``max_messages`` messages (see ``MessageWindowChatMemory``)."""

    _limit_name = "max_messages"

    def __init__(
        self,
        id: MemoryId = "default",
        *,
        max_messages: Limit,
        store: StoreT | None = None,
        always_keep_system_message_first: bool = False,
        retry: RetryPolicy | None = None,
        max_attempts: int | None = None,
        on_evict: EvictHook | None = None,
        on_oversized: OversizedPolicy = "evict",
        start_on: StartOn = "any",
    ) -> None:
        self._setup(
            id,
            store,
            max_messages,
            always_keep_system_message_first,
            retry,
            max_attempts,
            on_evict,
            on_oversized,
            start_on,
        )

    def _weight(self) -> MessageWeight:
        return count_one


class TokenWindowBase(WindowMemoryBase[StoreT]):
    """The token window's options: what fits in ``max_tokens`` (see ``TokenWindowChatMemory``)."""

    _limit_name = "max_tokens"

    def __init__(
        self,
        id: MemoryId = "default",
        *,
        max_tokens: Limit,
        token_count_estimator: TokenCountEstimator | None = None,
        store: StoreT | None = None,
        always_keep_system_message_first: bool = False,
        retry: RetryPolicy | None = None,
        max_attempts: int | None = None,
        cache_size: int = 4096,
        on_evict: EvictHook | None = None,
        on_oversized: OversizedPolicy = "evict",
        start_on: StartOn = "any",
    ) -> None:
        self._setup(
            id,
            store,
            max_tokens,
            always_keep_system_message_first,
            retry,
            max_attempts,
            on_evict,
            on_oversized,
            start_on,
        )
        # Counting a message can be costly (a BPE tokenizer): each distinct message is counted once.
        self._counts: LRU[ChatMessage, int] = LRU(cache_size)
        self.token_count_estimator: TokenCountEstimator
        self.token_count_estimator, self._own_estimator = window_estimator(token_count_estimator, cache_size)

    def _estimate(self, message: ChatMessage) -> int:
        tokens = self._counts.get(message)
        if tokens is None:
            tokens = self.token_count_estimator.estimate_message(message)
            self._counts.put(message, tokens)
        return tokens

    def _weight(self) -> MessageWeight:
        return counted_weight(self.token_count_estimator, self._own_estimator, self._estimate)

    def _total(self) -> TotalWeight | None:
        return request_total(self.token_count_estimator, self._weight())
