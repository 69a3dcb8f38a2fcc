"""The word list shipped for the default estimator is exactly what ``tests/core/tokens/word_list.py`` builds."""

from __future__ import annotations

import gzip

import pytest

from core.tokens import word_list

pytest.importorskip("bpe_openai")


def test_the_shipped_word_list_is_reproducible() -> None:
    assert word_list.SHIPPED.read_bytes() == word_list.build(), "run python tests/core/tokens/word_list.py"


def test_the_word_list_holds_one_token_words_only() -> None:
    from core.tokens.reference import ENCODINGS, reference_encoding

    words = gzip.decompress(word_list.SHIPPED.read_bytes()).decode("utf-8").split("\n")
    assert " information" in words
    assert len(words) > 50_000
    for name in ENCODINGS:
        encoding = reference_encoding(name)
        assert all(len(encoding.encode_ordinary(word)) == 1 for word in words[::97])
