"""Token count estimators for :class:`~chatmemory.TokenWindowChatMemory`.

Three to choose from, all framing messages the way OpenAI's Chat Completions API counts them
(:mod:`chatmemory.core.tokens.framing`):

* :class:`OpenAITokenCountEstimator` — exact counts with ``o200k_base`` / ``cl100k_base``, offline
  (``pip install 'llm-window-memory[openai-tokens]'``).
* :class:`TiktokenTokenCountEstimator` — exact counts with tiktoken (``pip install 'llm-window-memory[tiktoken]'``),
  which downloads its vocabulary once; or with any tiktoken-compatible encoding you pass.
* :class:`SimpleTokenCountEstimator` — no dependency; an estimate that cuts text into the encoding's own
  tokens, priced per script (its docstring says how close it comes); :class:`ScriptRates` holds its rates.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from chatmemory.core.messages import ChatMessage
from chatmemory.core.tokens.openai import OpenAITokenCountEstimator, TiktokenTokenCountEstimator
from chatmemory.core.tokens.scripts import ScriptRates, SimpleTokenCountEstimator

__all__ = [
    "OpenAITokenCountEstimator",
    "ScriptRates",
    "SimpleTokenCountEstimator",
    "TiktokenTokenCountEstimator",
    "TokenCountEstimator",
]


@runtime_checkable
class TokenCountEstimator(Protocol):
    """Estimates how many tokens a message takes in a prompt.

    An estimator may also define ``estimate_messages(messages) -> int`` to count a whole window when it
    is not the sum of its messages (for a per-request overhead); the token window then uses it for the
    total. ``estimate_message`` is called once per distinct message: the window caches the counts.
    """

    def estimate_message(self, message: ChatMessage) -> int:
        """Tokens that ``message`` takes in a prompt."""
        ...
