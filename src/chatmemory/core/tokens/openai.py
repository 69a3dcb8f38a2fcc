"""Exact token counts with OpenAI's encodings: offline with ``bpe-openai``, or through ``tiktoken``.

Both estimators count text with a real encoding and frame messages by
:mod:`chatmemory.core.tokens.framing`. Either accepts any tiktoken-compatible encoding object (one with
``encode_ordinary(text)``, or ``encode(text, disallowed_special=())``), so you can bring your own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chatmemory.core.tokens.framing import FramedEstimator

__all__ = ["OpenAITokenCountEstimator", "TiktokenTokenCountEstimator"]


def _text_counter(encoding: Any, owner: str) -> Callable[[str], int]:
    """A function counting the tokens of a text with a tiktoken-compatible ``encoding``.

    Special-token look-alikes (``"<|endoftext|>"`` typed by a user) count as plain text, as the API
    counts them.
    """
    encode_ordinary = getattr(encoding, "encode_ordinary", None)
    if callable(encode_ordinary):
        return lambda text: len(encode_ordinary(text))
    encode = getattr(encoding, "encode", None)
    if callable(encode):
        return lambda text: len(encode(text, disallowed_special=()))
    raise TypeError(
        f"{owner}: encoding must be an encoding name or a tiktoken-compatible object with encode_ordinary() "
        f"or encode(); got {type(encoding).__name__}"
    )


class _EncodingEstimator(FramedEstimator):
    """A framed estimator counting text with a function of one string."""

    _count_text: Callable[[str], int]

    def estimate_text(self, text: str) -> int:
        """Tokens in a piece of text, special-token look-alikes counted as plain text."""
        return self._count_text(text) if text else 0


class OpenAITokenCountEstimator(_EncodingEstimator):
    """Exact counts with OpenAI's ``o200k_base`` or ``cl100k_base``, offline: no download, ever.

    Needs the ``openai-tokens`` extra (``pip install 'chatmemory[openai-tokens]'``): the ``bpe-openai``
    package, whose wheel embeds both vocabularies and counts with GitHub's Rust ``bpe`` crate (MIT). Its
    counts equal tiktoken's on the same vocabulary, which the tests check. Loading an encoding takes about
    half a second once per process; counting a 500-character message takes about 15 µs.

    Args:
        encoding: ``"o200k_base"`` (GPT-4o, GPT-4.1, o-series and later), ``"cl100k_base"`` (GPT-4,
            GPT-3.5), or a tiktoken-compatible encoding object (then ``bpe-openai`` is not needed).
        model: a model name (``"gpt-4o"``) to pick the encoding for; overrides ``encoding``.
        per_message: tokens each message adds for its markers and role.
        per_name: tokens a user name adds beside its own tokens.
        per_tool_call: tokens each tool call adds beside its header and arguments.
        per_media: tokens for each non-text content part.
        reply_priming: tokens a request adds once, for the primed reply.
        count_thinking: count an AI message's thinking (only if you send it back to the model).
        cache_size: how many distinct messages' counts to keep.

    Raises:
        MissingDependencyError: ``bpe-openai`` is not installed and an encoding name was given.
        ValueError: the encoding or model is one ``bpe-openai`` does not know.
    """

    def __init__(
        self,
        encoding: str | Any = "o200k_base",
        *,
        model: str | None = None,
        per_message: int = 4,
        per_name: int = 1,
        per_tool_call: int = 3,
        per_media: int = 85,
        reply_priming: int = 3,
        count_thinking: bool = False,
        cache_size: int = 4096,
    ) -> None:
        super().__init__(
            per_message=per_message,
            per_name=per_name,
            per_tool_call=per_tool_call,
            per_media=per_media,
            reply_priming=reply_priming,
            count_thinking=count_thinking,
            cache_size=cache_size,
        )
        if model is None and not isinstance(encoding, str):
            self.encoding_name: str = str(getattr(encoding, "name", type(encoding).__name__))
            self._count_text = _text_counter(encoding, type(self).__name__)
            return
        from chatmemory.stores._optional import require

        bpe_openai = require("bpe_openai", feature=type(self).__name__, extra="openai-tokens")
        bindings = require("bpe_openai._bindings", feature=type(self).__name__, extra="openai-tokens")
        if model is not None:
            try:
                encoding = bpe_openai.encoding_name_for_model(model)
            except KeyError:
                raise ValueError(
                    f"{type(self).__name__}: bpe-openai knows no model {model!r}; pass encoding='o200k_base' "
                    "(GPT-4o and later) or 'cl100k_base' (GPT-4, GPT-3.5)"
                ) from None
        supported = list(bindings.supported_encodings())
        if encoding not in supported:
            raise ValueError(
                f"{type(self).__name__}: no offline encoding {encoding!r}"
                + (f" for model {model!r}" if model is not None else "")
                + f"; bpe-openai has {', '.join(supported)}"
            )
        self.encoding_name = str(encoding)
        # The Rust tokenizer's count() skips building the list of token ids; the Python Encoding wrapper
        # costs a few more microseconds a call for metrics and checks a count does not need.
        count = bindings.tokenizer_for_encoding(encoding).count

        def count_text(text: str) -> int:
            try:
                return int(count(text))
            except UnicodeEncodeError:
                # Lone surrogates cannot be UTF-8; tiktoken replaces them, and so do we.
                return int(count(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")))

        self._count_text = count_text

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.encoding_name!r})"


class TiktokenTokenCountEstimator(_EncodingEstimator):
    """Counts with a tiktoken encoding (``pip install 'chatmemory[tiktoken]'``), framed like the API.

    tiktoken downloads an encoding's vocabulary on first use, so this needs network access once (or
    ``TIKTOKEN_CACHE_DIR`` pointing at the cached file); :class:`OpenAITokenCountEstimator` needs neither.

    Args:
        model: a model name tiktoken knows (``"gpt-4o"``); ignored when ``encoding`` is given.
        encoding: a ``tiktoken.Encoding`` or any tiktoken-compatible object, or an encoding name such as
            ``"o200k_base"``.
        per_message: tokens each message adds for its markers and role.
        per_name: tokens a user name adds beside its own tokens.
        per_tool_call: tokens each tool call adds beside its header and arguments.
        per_media: tokens for each non-text content part.
        reply_priming: tokens a request adds once, for the primed reply.
        count_thinking: count an AI message's thinking (only if you send it back to the model).
        cache_size: how many distinct messages' counts to keep.
    """

    def __init__(
        self,
        model: str | None = "gpt-4o",
        *,
        encoding: Any = None,
        per_message: int = 4,
        per_name: int = 1,
        per_tool_call: int = 3,
        per_media: int = 85,
        reply_priming: int = 3,
        count_thinking: bool = False,
        cache_size: int = 4096,
    ) -> None:
        super().__init__(
            per_message=per_message,
            per_name=per_name,
            per_tool_call=per_tool_call,
            per_media=per_media,
            reply_priming=reply_priming,
            count_thinking=count_thinking,
            cache_size=cache_size,
        )
        if encoding is None and model is None:
            raise ValueError(f"{type(self).__name__}: pass a model name or an encoding")
        if encoding is None or isinstance(encoding, str):
            from chatmemory.stores._optional import require

            tiktoken = require("tiktoken", feature=type(self).__name__, extra="tiktoken")
            name = encoding or model
            try:
                encoding = tiktoken.get_encoding(encoding) if encoding else tiktoken.encoding_for_model(model)
            except (KeyError, ValueError) as exc:
                raise ValueError(f"tiktoken knows no model or encoding {name!r} ({exc})") from None
            except Exception as exc:
                # tiktoken downloads an encoding's vocabulary on first use; offline that fails deep inside
                # an HTTP client. Say what to do instead.
                raise RuntimeError(
                    f"tiktoken could not load the vocabulary for {name!r} ({type(exc).__name__}: {exc}). Without "
                    "network access, use OpenAITokenCountEstimator (pip install 'chatmemory[openai-tokens]'), "
                    "point TIKTOKEN_CACHE_DIR at a directory holding the cached file, or pass encoding= a "
                    "tiktoken.Encoding you built"
                ) from exc
        self.encoding = encoding
        self._count_text = _text_counter(encoding, type(self).__name__)
