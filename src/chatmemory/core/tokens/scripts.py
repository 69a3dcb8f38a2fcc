"""The dependency-free estimate: text cut into runs of one kind, each priced at a calibrated rate.

Byte-level BPE vocabularies (``o200k_base``, ``cl100k_base``) cut text at script, digit, space and
punctuation boundaries before merging bytes, so a text's count is close to a sum over such runs. The
rates below were fitted against the real tokenizers on the multilingual corpus shipped with the tests
(``tests/core/tokens``; ``python benchmarks/tokens.py`` prints the fit): the lowest rates that keep every
corpus text at or above its real count.

==================  =====================================================================================
run                 price
==================  =====================================================================================
Latin or Cyrillic   1 if the word (with its space) is one token in both encodings — the shipped
word                ``words.txt.gz``, about 58,000 words; else letters / ``letters_per_token`` (camelCase
                    parts looked up apart, all-capitals parts at ``capitals_per_token``, accented letters
                    weighing ``accent_weight``, Cyrillic at ``cyrillic_per_token``), plus 1 for a
                    non-ASCII word without a space before it, at least 1
Han, kana, Hangul   a rate per character
digits              one token per three digits, as both encodings cut them
whitespace          each stretch of one character (spaces, tabs, newlines) costs one token per
                    ``whitespace_per_token`` characters, at least one; a single space before a word or a
                    symbol is free (it joins that token); carriage returns and other whitespace one per
                    byte; one more before text when the run does not end a line (the split patterns cut
                    its last character off)
ASCII punctuation   one token per ``punctuation_per_token`` symbols; a lone symbol before a letter
                    (``.append``, ``(self``) ``glued_punctuation_tokens``
wide punctuation    CJK, full-width and general punctuation, a rate per mark
emoji               a rate per emoji and per joiner, variation selector or skin tone
anything else       one token per UTF-8 byte (and one for a space before it): the most a byte-level BPE
                    can take, so other scripts and rare symbols are never undercounted, only overcounted
numerals beyond     (``⒀``, ``٣``, ``²``, wherever they fall above) two tokens more each: the encodings cut
0-9                 a run of numerals of any kind into threes, so one of them shifts where the digits
                    beside it are cut, putting up to two of them in tokens of their own
==================  =====================================================================================

Fractional prices add up over the whole text, which is rounded up once.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import itertools
import math
import re
import unicodedata
from dataclasses import dataclass
from importlib import resources

from chatmemory.core.tokens.framing import FramedEstimator

__all__ = ["CALIBRATIONS", "ScriptRates", "SimpleTokenCountEstimator"]


@dataclass(frozen=True)
class ScriptRates:
    """The cost of each kind of run for one encoding (see the module docstring for how they are used).

    Attributes:
        letters_per_token: Latin letters per token in a word that is not in the word list.
        accent_weight: how many plain letters an accented Latin letter counts as.
        wide_accent_weight: the same for a letter of Latin Extended Additional (Vietnamese: three bytes).
        capitals_per_token: letters per token in an all-capitals word.
        cyrillic_per_token: Cyrillic letters per token in a word.
        han_tokens: tokens per Han ideograph.
        kana_tokens: tokens per kana character.
        hangul_tokens: tokens per Hangul syllable or jamo.
        punctuation_per_token: ASCII symbols per token in a run of them.
        glued_punctuation_tokens: tokens for one ASCII symbol right before a letter.
        wide_punctuation_tokens: tokens per CJK, full-width or general punctuation mark.
        whitespace_per_token: whitespace characters per token in a run of them.
        emoji_tokens: tokens per emoji code point.
        emoji_modifier_tokens: tokens per zero-width joiner, variation selector, skin tone or tag.
    """

    letters_per_token: float
    accent_weight: float
    wide_accent_weight: float
    capitals_per_token: float
    cyrillic_per_token: float
    han_tokens: float
    kana_tokens: float
    hangul_tokens: float
    punctuation_per_token: float
    glued_punctuation_tokens: float
    wide_punctuation_tokens: float
    whitespace_per_token: float
    emoji_tokens: float
    emoji_modifier_tokens: float


#: Rates per encoding, fitted on the corpus shipped with the tests (``python benchmarks/tokens.py`` prints
#: the fit): as low as keeps every corpus text at or above its real count.
CALIBRATIONS: dict[str, ScriptRates] = {
    "o200k_base": ScriptRates(
        letters_per_token=3.5241,
        accent_weight=2.3085,
        wide_accent_weight=2.0655,
        capitals_per_token=1.95,
        cyrillic_per_token=2.7528,
        han_tokens=0.9373,
        kana_tokens=0.9079,
        hangul_tokens=0.7005,
        punctuation_per_token=1.4333,
        glued_punctuation_tokens=0.1411,
        wide_punctuation_tokens=1.0925,
        whitespace_per_token=8.0,
        emoji_tokens=1.8915,
        emoji_modifier_tokens=1.287,
    ),
    "cl100k_base": ScriptRates(
        letters_per_token=2.3331,
        accent_weight=2.5404,
        wide_accent_weight=2.5404,
        capitals_per_token=1.859,
        cyrillic_per_token=1.2747,
        han_tokens=1.6435,
        kana_tokens=1.1868,
        hangul_tokens=1.4504,
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
_RUNS = re.compile(
    rf"(?P<word> ?[A-Za-z{_LATIN_ACCENTED}\u0400-\u052f]+)"
    r"|(?P<han>[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]+)"
    r"|(?P<kana>[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]+)"
    r"|(?P<hangul>[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]+)"
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
_NUMERAL_TOKENS = 2
"""Tokens a numeral other than 0-9 adds: the digits it regroups (see the module's table)."""


def _numerals(run: str) -> int:
    """How many characters of ``run`` are numerals (Unicode category N) the encodings cut with digits."""
    return sum(unicodedata.category(character)[0] == "N" for character in run)


_known_numerals = functools.lru_cache(maxsize=4096)(_numerals)
""":func:`_numerals` of runs of wide punctuation, which come again and again (a full-width comma, a stop)."""

WORD_COSTS_KEPT = 65536
"""How many words not in the one-token list an estimator remembers the price of (then it starts again)."""


# o200k_base cuts words at case changes (camelCase); cutting there too lets each part be looked up.
_CASE_PARTS = re.compile(r" ?(?:[A-Z]?[a-z]+|[A-Z]+(?![a-z]))")
_ACCENTED = re.compile(f"[{_LATIN_ACCENTED}]")
_WIDE_ACCENTED = re.compile("[\u1e00-\u1eff]")
_CYRILLIC = re.compile("[\u0400-\u052f]")
_MODIFIER = re.compile(f"[{_EMOJI_MODIFIERS}]")


@functools.cache
def _one_token_words() -> frozenset[str]:
    """Words that are one token in both encodings, spelled as the token (see ``words.txt.gz``)."""
    packed = resources.files("chatmemory.core.tokens").joinpath("words.txt.gz").read_bytes()
    return frozenset(gzip.decompress(packed).decode("utf-8").split("\n"))


class SimpleTokenCountEstimator(FramedEstimator):
    """A dependency-free estimate calibrated per script, meant never to fall below the real count.

    Where that holds, and where it does not:

    * **On the corpus it was fitted on** (shipped with the tests: English and nine other Latin-script
      languages, Chinese, Japanese, Korean, Russian, Ukrainian, Bulgarian, code, emoji, numbers,
      whitespace and mixtures; 343 texts), the estimate is never below the real count of the encoding it
      is calibrated for, and about 13-15 % above it at the median; nor on conversations with tool calls
      made from it. **On 24 held-out sentences** it was not fitted on, the median is about 1.11, but one
      or two fall below the real count, by up to 20 % (Korean, Vietnamese, Ukrainian: languages the
      corpus samples thinly), so a window of such text can overflow by a little.
    * **On any text** made of digits, whitespace and characters outside the calibrated scripts (Arabic,
      Hebrew, Devanagari, Thai, symbols, ...), it is never below the real count: those are priced at the
      most they can take. Hypothesis tests this.
    * **Not guaranteed elsewhere.** Words, ideographs, emoji and punctuation are priced at the rates of
      natural text: gibberish letter strings, rare ideographs, rare emoji and dense runs of punctuation can
      take more tokens than estimated (up to about 2-3x for random letters). Use
      :class:`~chatmemory.OpenAITokenCountEstimator` when a window must never overflow.

    Rates for ``o200k_base`` (GPT-4o and later) are the default; GPT-4 and GPT-3.5 use ``cl100k_base``,
    which needs up to about twice as many tokens for CJK and Cyrillic text: pass ``"cl100k_base"`` for them.
    Other vendors' tokenizers are not calibrated.

    Args:
        encoding: whose rates to use: ``"o200k_base"`` or ``"cl100k_base"``, or your own
            :class:`ScriptRates`.
        chars_per_token: overrides ``letters_per_token``, the letters per token of a Latin word that is
            not in the word list (larger estimates less).
        margin: multiplies every text's estimate, for head-room beyond the fit: 1.35 covers every held-out
            sentence of the tests, at the price of a third more budget left unused.
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
        chars_per_token: float | None = None,
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
        if chars_per_token is not None:
            if chars_per_token <= 0:
                raise ValueError(f"SimpleTokenCountEstimator: chars_per_token must be > 0, got {chars_per_token}")
            rates = dataclasses.replace(rates, letters_per_token=chars_per_token)
        if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not margin >= 1.0:
            raise ValueError(f"SimpleTokenCountEstimator: margin must be a number >= 1.0, got {margin!r}")
        self.rates = rates
        self.margin = float(margin)
        self._words = _one_token_words()
        self._word_costs: dict[str, float] = {}
        self._priced_with = self.rates

    def estimate_text(self, text: str) -> int:
        """Tokens in a piece of text, by the calibrated rates."""
        rates = self.rates
        words, word_costs = self._words, self._word_costs
        if rates is not self._priced_with:  # prices remembered under other rates no longer hold
            word_costs.clear()
            self._priced_with = rates
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
            elif kind == "han":
                tokens += len(run) * rates.han_tokens
            elif kind == "kana":
                tokens += len(run) * rates.kana_tokens
            elif kind == "hangul":
                tokens += len(run) * rates.hangul_tokens
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
        cost = self._word(word)
        if len(self._word_costs) >= WORD_COSTS_KEPT:
            self._word_costs.clear()
        self._word_costs[word] = cost
        return cost

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

    def _word(self, word: str) -> float:
        """Tokens of a Latin or Cyrillic word, with the space before it if there is one."""
        words = self._words
        if word in words:
            return 1.0
        rates = self.rates
        letters = len(word) - word.startswith(" ")
        if word.isascii():
            parts = _CASE_PARTS.findall(word)
            # A capitalised word the vocabularies do not hold, starting a text or a line, splits further.
            tokens = 1.0 if parts and parts[0][0].isupper() and parts[0] not in words else 0.0
            for part in parts:
                if part in words:
                    tokens += 1.0
                elif part.strip().isupper() and len(part.strip()) > 1:
                    tokens += max(1.0, len(part.strip()) / rates.capitals_per_token)
                else:
                    tokens += max(1.0, len(part.strip()) / rates.letters_per_token)
            return tokens
        # Vocabularies learned these words after a space; without one they split further.
        bare = 0.0 if word.startswith(" ") else 1.0
        cyrillic = len(_CYRILLIC.findall(word))
        if cyrillic:
            return max(1.0, cyrillic / rates.cyrillic_per_token + (letters - cyrillic) / 2 + bare)
        accented = len(_ACCENTED.findall(word))
        wide = len(_WIDE_ACCENTED.findall(word))
        weight = letters - accented + (accented - wide) * rates.accent_weight + wide * rates.wide_accent_weight
        return max(1.0, weight / rates.letters_per_token + bare)
