"""Exact token counts with OpenAI's encodings: offline with ``bpe-openai``, or through ``tiktoken``.

Both estimators count text with a real encoding and frame messages by
:mod:`chatmemory.core.tokens.framing`. Either accepts any tiktoken-compatible encoding object (one with
``encode_ordinary(text)``, or ``encode(text, disallowed_special=())``), so you can bring your own.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from chatmemory.core.errors import MissingDependencyError, install_hint
from chatmemory.core.tokens.framing import FramedEstimator

__all__ = ["OpenAITokenCountEstimator", "TiktokenTokenCountEstimator"]

# Model name prefixes and their encodings, newest families first (as tiktoken maps them).
_MODEL_PREFIXES = (
    ("gpt-5", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4o", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("gpt-oss", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("gpt-35", "cl100k_base"),
    ("text-embedding-3", "cl100k_base"),
    ("text-embedding-ada-002", "cl100k_base"),
)


def encoding_for_model(model: str) -> str | None:
    """The OpenAI encoding a model name uses (fine-tuned ``ft:`` names too), or ``None`` if unknown."""
    name = model.removeprefix("ft:")
    for prefix, encoding in _MODEL_PREFIXES:
        # "o1" must not claim every name starting with an o: o-series names are "o1" or "o1-...".
        if name.startswith(prefix) and (not prefix.startswith("o") or name[len(prefix) :][:1] in ("", "-", ":")):
            return encoding
    return None


# A PyO3 extension may be initialised once per process: two threads loading it at once would collide.
_LOADING = threading.Lock()


def _bpe_openai_bindings(feature: str) -> ModuleType:
    """The Rust extension of ``bpe-openai``, loaded without running the package's ``__init__``.

    Importing ``bpe_openai`` parses all three of its vocabularies into Python dictionaries (about three
    seconds and 60 MB) for its tiktoken look-alike wrapper; counting needs only the
    extension, which carries its own compiled vocabularies. The extension is registered under its own
    name, so a later ``import bpe_openai`` reuses it. If the wheel's layout ever changes, the ordinary
    import is the fallback.
    """
    if "bpe_openai" in sys.modules and sys.modules["bpe_openai"] is None:  # import blocked on purpose
        raise MissingDependencyError(feature, "openai-tokens", "bpe_openai")
    with _LOADING:
        return _load_bindings(feature)


def _load_bindings(feature: str) -> ModuleType:
    loaded = sys.modules.get("bpe_openai._bindings")
    if loaded is not None:
        return loaded
    try:
        spec = importlib.util.find_spec("bpe_openai")
    except (ImportError, ValueError) as exc:
        raise MissingDependencyError(feature, "openai-tokens", "bpe_openai") from exc
    if spec is None:
        raise MissingDependencyError(feature, "openai-tokens", "bpe_openai")
    for directory in spec.submodule_search_locations or ():
        for entry in sorted(os.listdir(directory)):
            if entry.startswith("_bindings.") and entry.endswith((".so", ".pyd")):
                extension = importlib.util.spec_from_file_location(
                    "bpe_openai._bindings", os.path.join(directory, entry)
                )
                if extension is None or extension.loader is None:
                    continue
                module = importlib.util.module_from_spec(extension)
                extension.loader.exec_module(module)
                sys.modules["bpe_openai._bindings"] = module
                return module
    from chatmemory.core.optional import require

    return require("bpe_openai._bindings", feature=feature, extra="openai-tokens")


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

    Needs the ``openai-tokens`` extra (``pip install 'llm-window-memory[openai-tokens]'``): the ``bpe-openai``
    package (MIT; a 41 MB wheel for Linux, macOS and Windows), which counts with GitHub's Rust ``bpe``
    crate over vocabularies compiled into it. Its counts equal tiktoken's on OpenAI's vocabulary files,
    which the tests check. Loading an encoding takes about 0.3 s and 65 MB (``o200k_base``) once per
    process; counting a 500-character message takes about 15 µs of CPU.

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
        if model is not None:
            named = encoding_for_model(model)
            if named is None:
                raise ValueError(
                    f"{type(self).__name__}: no known encoding for model {model!r}; pass encoding='o200k_base' "
                    "(GPT-4o and later) or 'cl100k_base' (GPT-4, GPT-3.5)"
                )
            encoding = named
        bindings = _bpe_openai_bindings(type(self).__name__)
        supported = list(bindings.supported_encodings())
        if encoding not in supported:
            raise ValueError(
                f"{type(self).__name__}: no offline encoding {encoding!r}; bpe-openai has {', '.join(supported)}"
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
    """Counts with a tiktoken encoding (``pip install 'llm-window-memory[tiktoken]'``), framed like the API.

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
            from chatmemory.core.optional import require

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
                    f"network access, use OpenAITokenCountEstimator ({install_hint('openai-tokens')}), "
                    "point TIKTOKEN_CACHE_DIR at a directory holding the cached file, or pass encoding= a "
                    "tiktoken.Encoding you built"
                ) from exc
        self.encoding = encoding
        self._count_text = _text_counter(encoding, type(self).__name__)
