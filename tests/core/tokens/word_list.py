"""Builds ``chatmemory/core/tokens/words_<encoding>.txt.gz``: an encoding's tokens made of letters only.

:class:`~chatmemory.SimpleTokenCountEstimator` prices a word as one token when the encoding holds it whole
(most running English words), and otherwise cuts it, and every run of Han, kana or Hangul, into the
longest pieces the encoding holds, as a stand-in for its BPE merges. Each list holds every token of one
encoding spelled with the letters the estimator segments (Latin, Cyrillic, Han, kana, Hangul), with or
without its leading space, exactly as the token is spelled. ``tests/core/test_token_estimators_words.py``
checks the shipped files equal what this module builds; regenerate with
``python tests/core/tokens/word_list.py``.
"""

from __future__ import annotations

import gzip
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from chatmemory.core.tokens.scripts import SEGMENTED_LETTERS
from core.tokens.reference import ENCODINGS, reference_encoding

SHIPPED_DIR = Path(__file__).resolve().parents[3] / "src" / "chatmemory" / "core" / "tokens"

_LETTER_TOKEN = re.compile(f" ?[{SEGMENTED_LETTERS}]+")


def shipped(encoding_name: str) -> Path:
    """Where the list for ``encoding_name`` is shipped."""
    return SHIPPED_DIR / f"words_{encoding_name}.txt.gz"


def build(encoding_name: str) -> bytes:
    """The gzipped list for one encoding, one token per line, sorted (byte-for-byte reproducible)."""
    words = set()
    for token in reference_encoding(encoding_name).token_byte_values():
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if _LETTER_TOKEN.fullmatch(text):
            words.add(text)
    return gzip.compress("\n".join(sorted(words)).encode("utf-8"), compresslevel=9, mtime=0)


if __name__ == "__main__":
    for name in ENCODINGS:
        path = shipped(name)
        path.write_bytes(build(name))
        print(f"wrote {path} ({path.stat().st_size} bytes)")
