"""Builds ``chatmemory/core/tokens/words.txt.gz``: the words that are one token in both OpenAI encodings.

:class:`~chatmemory.SimpleTokenCountEstimator` costs a word found in this list at one token, which is what
makes its estimate of English close (most running English words are one token), while words not in it
are costed at the conservative rate that other languages need. Every entry is a token of both
``o200k_base`` and ``cl100k_base``: letters only (any script, at least three), with or without its
leading space, exactly as the token is spelled. ``tests/core/test_token_estimators_words.py`` checks the
shipped file equals what this module builds; regenerate with ``python tests/core/tokens/word_list.py``.
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from core.tokens.reference import ENCODINGS, reference_encoding

SHIPPED = Path(__file__).resolve().parents[3] / "src" / "chatmemory" / "core" / "tokens" / "words.txt.gz"


def _letter_tokens(encoding_name: str) -> set[str]:
    words = set()
    for token in reference_encoding(encoding_name).token_byte_values():
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            continue
        word = text[1:] if text.startswith(" ") else text
        if len(word) >= 3 and word.isalpha():
            words.add(text)
    return words


def build() -> bytes:
    """The gzipped word list, one token per line, sorted (byte-for-byte reproducible)."""
    words = set.intersection(*(_letter_tokens(name) for name in ENCODINGS))
    return gzip.compress("\n".join(sorted(words)).encode("utf-8"), compresslevel=9, mtime=0)


if __name__ == "__main__":
    SHIPPED.write_bytes(build())
    print(f"wrote {SHIPPED} ({SHIPPED.stat().st_size} bytes)")
