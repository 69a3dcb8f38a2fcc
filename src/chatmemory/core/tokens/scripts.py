"""The dependency-free estimate: text cut into the runs a BPE pre-tokenizer makes, each priced by a rule.

Method: a word is one token when the encoding holds it whole (``words_<encoding>.txt.gz``: the encoding's
own letter tokens); any other word (cut at case changes) and every run of Han, kana or Hangul, with the
space before it, is cut greedily into the longest tokens of that list, as a stand-in for the BPE merges,
and the pieces are priced at one rate per script: the 90th percentile over the calibration corpus of real
tokens per piece (``tests/core/tokens/calibrate.py``), so BPE's occasional extra piece is covered. Digits
cost a token per three, whitespace and punctuation by run rules, emoji per code point; characters outside
these scripts cost their UTF-8 bytes, the most a byte-level BPE takes. Fractional prices add up over the
text, rounded up once; framing is added per message (:mod:`~chatmemory.core.tokens.framing`). Figures on
held-out chat messages: ``python benchmarks/tokens.py``.
"""

from __future__ import annotations

import functools
import gzip
import itertools
import math
import re
import unicodedata
from dataclasses import dataclass
from importlib import resources
from typing import Any

from chatmemory.core.tokens.framing import FramedEstimator

__all__ = ["CALIBRATIONS", "ScriptRates", "SimpleTokenCountEstimator"]


@dataclass(frozen=True)
class ScriptRates:
    """The cost of each kind of run for one encoding.

    ==================  =================================================================================
    run                 price
    ==================  =================================================================================
    Latin or Cyrillic   1 if the vocabulary holds the word (with its space) whole; else its pieces (ASCII
    word                words cut at case changes first) times ``word_tokens`` or ``cyrillic_tokens``
    Han, kana, Hangul   pieces (with the space before the run) times ``han_tokens``, ``kana_tokens`` or
                        ``hangul_tokens``
    digits              one token per three digits, as both encodings cut them
    whitespace          each stretch of one character (spaces, tabs, newlines) costs one token per
                        ``whitespace_per_token`` characters, at least one; a single space before a word or
                        a symbol is free (it joins that token); carriage returns and other whitespace one
                        per byte; one more before text when the run does not end a line
    ASCII punctuation   one token per ``punctuation_per_token`` symbols; a lone symbol before a letter
                        (``.append``, ``(self``) ``glued_punctuation_tokens``
    wide punctuation    CJK, full-width and general punctuation, ``wide_punctuation_tokens`` per mark
    emoji               ``emoji_tokens`` per emoji, ``emoji_modifier_tokens`` per joiner, variation
                        selector, skin tone or tag
    anything else       one token per UTF-8 byte (and one for a space before it)
    numerals beyond     (``⒀``, ``٣``, ``²``, wherever they fall above) two tokens more each: a numeral
    0-9                 shifts where the digits beside it are cut into threes
    ==================  =================================================================================

    A piece is a token of the vocabulary's letter tokens, cut greedily longest first; a character that
    starts none costs its UTF-8 bytes.

    Attributes:
        vocabulary: whose letter tokens words and Han, kana and Hangul runs are cut into
            (``"o200k_base"`` or ``"cl100k_base"``).
        word_tokens: tokens per piece of a Latin word the vocabulary does not hold whole.
        cyrillic_tokens: tokens per piece of a Cyrillic word the vocabulary does not hold whole.
        han_tokens: tokens per piece of a run of Han ideographs.
        kana_tokens: tokens per piece of a run of kana.
        hangul_tokens: tokens per piece of a run of Hangul.
        punctuation_per_token: ASCII symbols per token in a run of them.
        glued_punctuation_tokens: tokens for one ASCII symbol right before a letter.
        wide_punctuation_tokens: tokens per CJK, full-width or general punctuation mark.
        whitespace_per_token: whitespace characters per token in a run of them.
        emoji_tokens: tokens per emoji code point.
        emoji_modifier_tokens: tokens per zero-width joiner, variation selector, skin tone or tag.
    """

    vocabulary: str
    word_tokens: float
    cyrillic_tokens: float
    han_tokens: float
    kana_tokens: float
    hangul_tokens: float
    punctuation_per_token: float
    glued_punctuation_tokens: float
    wide_punctuation_tokens: float
    whitespace_per_token: float
    emoji_tokens: float
    emoji_modifier_tokens: float


#: Rates per encoding. The piece rates come from the calibration corpus shipped with the tests (see the
#: module docstring; ``python tests/core/tokens/calibrate.py`` prints them); the others are the lowest
#: that kept every calibration text at or above its real count.
CALIBRATIONS: dict[str, ScriptRates] = {
    "o200k_base": ScriptRates(
        vocabulary="o200k_base",
        word_tokens=1.0,
        cyrillic_tokens=1.084,
        han_tokens=1.0,
        kana_tokens=1.0,
        hangul_tokens=1.0,
        punctuation_per_token=1.4333,
        glued_punctuation_tokens=0.1411,
        wide_punctuation_tokens=1.0925,
        whitespace_per_token=8.0,
        emoji_tokens=1.8915,
        emoji_modifier_tokens=1.287,
    ),
    "cl100k_base": ScriptRates(
        vocabulary="cl100k_base",
        word_tokens=1.099,
        cyrillic_tokens=1.038,
        han_tokens=0.94,
        kana_tokens=1.0,
        hangul_tokens=0.936,
        punctuation_per_token=1.586,
        glued_punctuation_tokens=0.15,
        wide_punctuation_tokens=1.2049,
        whitespace_per_token=8.0,
        emoji_tokens=2.8133,
        emoji_modifier_tokens=1.6632,
    ),
}

_LATIN_ACCENTED = "\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff"
_EMOJI = "\U0001f300-\U0001f6ff\U0001f900-\U0001f9ff\U0001fa70-\U0001faff\u2600-\u27bf\u2b00-\u2bff\u2300-\u23ff"
_EMOJI_MODIFIERS = "\u200d\ufe0f\ufe0e\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f"
# Unicode White_Space, as the encodings' split patterns mean by \s (Python's \s also takes \x1c-\x1f).
_WS = " \t\n\r\x0b\x0c\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_WHITESPACE = frozenset(" \t\n\r\x0b\x0c\x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | {
    chr(code) for code in range(0x2000, 0x200B)
}
_WORD_LETTERS = f"A-Za-z{_LATIN_ACCENTED}\u0400-\u052f"
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_KANA = "\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f"
_HANGUL = "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
#: The letters whose runs are cut into vocabulary pieces (a character class body, for ``re``).
SEGMENTED_LETTERS = _WORD_LETTERS + _HAN + _KANA + _HANGUL
_RUNS = re.compile(
    rf"(?P<word> ?[{_WORD_LETTERS}]+)"
    # A space before a run of Han, kana or Hangul is cut with it: the vocabularies hold few such tokens.
    rf"|(?P<han> ?[{_HAN}]+)"
    rf"|(?P<kana> ?[{_KANA}]+)"
    rf"|(?P<hangul> ?[{_HANGUL}]+)"
    r"|(?P<digits>[0-9]+)"
    # A space before a letter or a symbol joins its token ("    if" is "   " and " if"; " (" is one
    # token); before a digit it is a token of its own.
    rf"|(?P<space> (?=[^{_WS}0-9]))"
    # Other whitespace before a letter takes the letter into its token and splits the word ("\tB", "er").
    r"|(?P<split_word>[\t\x0b\x0c\x85\xa0](?=[A-Za-z]))"
    rf"|(?P<whitespace>[{_WS}]+?(?= [^{_WS}0-9])|[{_WS}]+)"
    # A lone symbol before a letter mostly joins the word's token (".append", "(self", "#include").
    r"|(?P<glued>[!-/:-@\[-`{-~](?=[A-Za-z]))"
    r"|(?P<punctuation>[!-/:-@\[-`{-~]+)"
    r"|(?P<wide_punctuation>[\u3000-\u303f\uff00-\uff65\u2010-\u2027\u00a0-\u00bf]+)"
    rf"|(?P<emoji>[{_EMOJI}{_EMOJI_MODIFIERS}]+)"
    r"|(?P<other>.)",
    re.DOTALL,
)
_PIECE_RATES = {"han": "han_tokens", "kana": "kana_tokens", "hangul": "hangul_tokens"}
_NUMERAL_TOKENS = 2
"""Tokens a numeral other than 0-9 adds: the digits it regroups (see :class:`ScriptRates`)."""


def _numerals(run: str) -> int:
    """How many characters of ``run`` are numerals (Unicode category N) the encodings cut with digits."""
    return sum(unicodedata.category(character)[0] == "N" for character in run)


_known_numerals = functools.lru_cache(maxsize=4096)(_numerals)
""":func:`_numerals` of runs of wide punctuation, which come again and again (a full-width comma, a stop)."""

WORD_COSTS_KEPT = 65536
"""How many prices of words not held whole, and of runs of Han, kana or Hangul, an estimator remembers
(then it starts again)."""


# o200k_base cuts words at case changes (camelCase); cutting there too lets each part be looked up.
_CASE_PARTS = re.compile(r" ?(?:[A-Z]?[a-z]+|[A-Z]+(?![a-z]))")
_CYRILLIC = re.compile("[\u0400-\u052f]")
_WIDE_LETTER = re.compile(f"[{_HAN}{_KANA}{_HANGUL}]")
_MODIFIER = re.compile(f"[{_EMOJI_MODIFIERS}]")


@dataclass(frozen=True)
class _Vocabulary:
    """An encoding's letter tokens (``words_<encoding>.txt.gz``), as a set and as lookups.

    ``longest`` holds the longest token's length per first character (two after a space); ``wide_trie``
    the Han, kana and Hangul tokens as nested dicts by character, ``""`` marking a token's end.
    """

    words: frozenset[str]
    longest: dict[str, int]
    wide_trie: dict[str, Any]


@functools.cache
def _vocabulary(encoding: str) -> _Vocabulary:
    """The letter tokens of ``encoding``, spelled as the tokens are (see ``tests/core/tokens/word_list.py``)."""
    packed = resources.files("chatmemory.core.tokens").joinpath(f"words_{encoding}.txt.gz").read_bytes()
    words = frozenset(gzip.decompress(packed).decode("utf-8").split("\n"))
    longest: dict[str, int] = {}
    wide_trie: dict[str, Any] = {}
    for word in words:
        key = word[:2] if word.startswith(" ") else word[0]
        if len(word) > longest.get(key, 0):
            longest[key] = len(word)
        if _WIDE_LETTER.search(word):
            node = wide_trie
            for character in word:
                node = node.setdefault(character, {})
            node[""] = True
    return _Vocabulary(words, longest, wide_trie)


class SimpleTokenCountEstimator(FramedEstimator):
    """A dependency-free estimate that cuts words and CJK text into the encoding's own tokens, per script.

    How close it comes, and where it can fall below the real count:

    * **On held-out chat messages** (shipped with the tests apart from the calibration corpus: English and
      nine other Latin-script languages, Chinese, Japanese, Korean, Russian, Ukrainian, Bulgarian, code,
      emoji, numbers, English mixed with Chinese, Japanese or Russian, and tool calls with their results;
      110 messages, framing included), the estimate is about 3 % above the real ``o200k_base`` count at
      the median (6 % for ``cl100k_base``), and 95 % of them are at least 0.98 of it; the lowest is 8 % below
      (Finnish, whose words BPE cuts into more pieces than the longest match), so a window of such text
      can overflow by a little. ``margin=1.1`` covers every held-out text.
    * **On the calibration corpus** (343 texts in the same languages), about 5-7 % above at the median;
      a few texts fall below, by up to 5 %.
    * **On any text** made of digits, whitespace and characters outside the calibrated scripts (Arabic,
      Hebrew, Devanagari, Thai, symbols, ...), it is never below the real count: those are priced at the
      most they can take. Hypothesis tests this.
    * **Not guaranteed elsewhere.** BPE can cut a word into more pieces than the longest match (random
      letter strings: up to about 10 % more tokens than estimated), and emoji and punctuation are priced
      at the rates of natural text, which rare emoji and dense runs of punctuation can exceed. Use
      :class:`~chatmemory.OpenAITokenCountEstimator` when a window must never overflow.

    Rates for ``o200k_base`` (GPT-4o and later) are the default; GPT-4 and GPT-3.5 use ``cl100k_base``,
    which needs up to about twice as many tokens for CJK and Cyrillic text: pass ``"cl100k_base"`` for them.
    Other vendors' tokenizers are not calibrated.

    Args:
        encoding: whose rates to use: ``"o200k_base"`` or ``"cl100k_base"``, or your own
            :class:`ScriptRates`.
        margin: multiplies every text's estimate, for head-room beyond the fit: 1.1 covers every held-out
            text of the tests, at the price of a tenth more budget left unused.
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
        encoding: str | ScriptRates = "o200k_base",
        *,
        margin: float = 1.0,
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
        if isinstance(encoding, ScriptRates):
            rates = encoding
        elif encoding in CALIBRATIONS:
            rates = CALIBRATIONS[encoding]
        else:
            raise ValueError(
                f"SimpleTokenCountEstimator has no calibration for {encoding!r}; use one of "
                f"{', '.join(CALIBRATIONS)} or pass ScriptRates"
            )
        if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not margin >= 1.0:
            raise ValueError(f"SimpleTokenCountEstimator: margin must be a number >= 1.0, got {margin!r}")
        self.rates = rates
        self.margin = float(margin)
        self._word_costs: dict[str, float] = {}
        self._priced_with = self.rates
        self._vocabulary = _vocabulary(self.rates.vocabulary)

    def estimate_text(self, text: str) -> int:
        """Tokens in a piece of text, by the calibrated rates."""
        rates = self.rates
        word_costs = self._word_costs
        if rates is not self._priced_with:  # prices remembered under other rates no longer hold
            word_costs.clear()
            self._priced_with = rates
            self._vocabulary = _vocabulary(rates.vocabulary)
        words = self._vocabulary.words
        # A subclass pricing words its own way is asked for every word, as if nothing were remembered.
        remembers = type(self)._word is SimpleTokenCountEstimator._word
        # Fractional costs add up over the whole text; rounding each run up would overcount short runs.
        tokens = 0.0
        after_space = False
        for match in _RUNS.finditer(text):
            kind = match.lastgroup
            run = match.group()
            if kind == "word":
                if not remembers:
                    tokens += self._word(run)
                elif run in words:
                    tokens += 1.0
                else:
                    cost = word_costs.get(run)
                    if cost is None:
                        cost = self._word_cost(run)
                    tokens += cost
            elif kind == "space":
                after_space = True
                continue
            elif kind == "han" or kind == "kana" or kind == "hangul":
                cost = word_costs.get(run)
                if cost is None:
                    cost = self._remember(run, self._wide_pieces(run) * getattr(rates, _PIECE_RATES[kind]))
                tokens += cost
            elif kind == "digits":
                tokens += math.ceil(len(run) / 3)
            elif kind == "whitespace":
                tokens += self._whitespace(run, match.end() < len(text) and text[match.end()] not in _WHITESPACE)
            elif kind == "split_word":
                tokens += 2
            elif kind == "glued":
                tokens += rates.glued_punctuation_tokens
            elif kind == "punctuation":
                tokens += max(1.0, len(run) / rates.punctuation_per_token)
            elif kind == "wide_punctuation":
                tokens += len(run) * rates.wide_punctuation_tokens + _NUMERAL_TOKENS * _known_numerals(run)
            elif kind == "emoji":
                modifiers = len(_MODIFIER.findall(run))
                tokens += (len(run) - modifiers) * rates.emoji_tokens + modifiers * rates.emoji_modifier_tokens
            else:
                # No rate covers this character, so count every byte, and the space before it: a
                # vocabulary may hold no token joining a space to it.
                tokens += len(run.encode("utf-8", "surrogatepass")) + after_space + _NUMERAL_TOKENS * _numerals(run)
            after_space = False
        return math.ceil(tokens * self.margin - 1e-9)

    def _word_cost(self, word: str) -> float:
        """:meth:`_word`, remembered for the next time ``word`` comes (a bounded number of words)."""
        return self._remember(word, self._word(word))

    def _remember(self, run: str, cost: float) -> float:
        """Keeps the price of ``run`` (a word, or a run of Han, kana or Hangul) for the next time it comes."""
        if len(self._word_costs) >= WORD_COSTS_KEPT:
            self._word_costs.clear()
        self._word_costs[run] = cost
        return cost

    def _pieces(self, run: str) -> float:
        """Tokens of ``run`` cut greedily into the longest letter tokens of the vocabulary.

        A character no letter token starts with costs its UTF-8 bytes, as a byte-level BPE takes it.
        """
        vocabulary = self._vocabulary
        words, longest = vocabulary.words, vocabulary.longest
        tokens = 0
        start, end = 0, len(run)
        while start < end:
            first = run[start]
            stop = min(end, start + longest.get(run[start : start + 2] if first == " " else first, 1))
            while stop > start + 1 and run[start:stop] not in words:
                stop -= 1
            if stop == start + 1 and first not in words:
                tokens += len(first.encode("utf-8", "surrogatepass"))
            else:
                tokens += 1
            start = stop
        return float(tokens)

    def _whitespace(self, run: str, before_text: bool) -> float:
        """Tokens of a run of whitespace: each stretch of one character costs apart.

        Vocabularies merge long stretches of spaces, tabs or newlines, but hardly any mixture of them;
        a carriage return is a token of its own, and other whitespace is costed by its bytes.
        """
        tokens = 0.0
        for character, stretch in itertools.groupby(run):
            length = len(list(stretch))
            if character in " \t\n":
                tokens += max(1.0, length / self.rates.whitespace_per_token)
            else:
                tokens += length * len(character.encode("utf-8"))
        # Before text, the split patterns cut the last character off a run that does not end a line: it
        # is a token of its own, or joins a token it does not shorten.
        return tokens + 1 if before_text and len(run) > 1 and run[-1] not in "\r\n" else tokens

    def _wide_pieces(self, run: str) -> float:
        """:meth:`_pieces` of a run of Han, kana or Hangul: each piece grown a character at a time."""
        trie = self._vocabulary.wide_trie
        tokens = 0
        start, end = 0, len(run)
        while start < end:
            node = trie.get(run[start])
            piece = start + 1 if node is not None and "" in node else 0
            stop = start + 1
            while node is not None and stop < end:
                node = node.get(run[stop])
                stop += 1
                if node is not None and "" in node:
                    piece = stop
            if piece:
                tokens += 1
                start = piece
            else:  # a byte-level BPE takes the character (and a space before it) in bytes
                tokens += len(run[start].encode("utf-8", "surrogatepass"))
                start += 1
        return float(tokens)

    def _word(self, word: str) -> float:
        """Tokens of a Latin or Cyrillic word, with the space before it if there is one."""
        words = self._vocabulary.words
        if word in words:
            return 1.0
        rates = self.rates
        rate = rates.cyrillic_tokens if _CYRILLIC.search(word) else rates.word_tokens
        if not word.isascii():
            return max(1.0, self._pieces(word) * rate)
        # o200k_base cuts ASCII words at case changes (camelCase, "HTTPServer"): each part is cut apart.
        pieces = sum(1.0 if part in words else self._pieces(part) for part in _CASE_PARTS.findall(word))
        return max(1.0, pieces * rate)
