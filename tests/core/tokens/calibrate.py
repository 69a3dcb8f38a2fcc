"""Derives the piece rates of :class:`~chatmemory.SimpleTokenCountEstimator` from the calibration corpus.

A word the vocabulary does not hold whole, and a run of Han, kana or Hangul, is priced as the number of
longest vocabulary pieces it cuts into times a rate per script. BPE merges by rank, not by length, so it
sometimes takes more pieces than the longest match: per script, the rate is the 90th percentile over the
calibration sentences (``corpus.json``, never ``heldout.json``) of real tokens / pieces, summed over the
text's runs of that script, rounded up to three decimals. Run ``python tests/core/tokens/calibrate.py``
to print them; ``tests/core/test_token_estimators_calibration.py`` checks the shipped rates equal them.
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from chatmemory import SimpleTokenCountEstimator
from chatmemory.core.tokens.scripts import _CASE_PARTS, _CYRILLIC, _RUNS
from core.tokens.corpus import sentences
from core.tokens.reference import ENCODINGS, reference_encoding

__all__ = ["PIECE_RATES", "piece_rates"]

PIECE_RATES = {"word": "word_tokens", "cyrillic": "cyrillic_tokens", "han": "han_tokens"}
PIECE_RATES |= {"kana": "kana_tokens", "hangul": "hangul_tokens"}


def _runs(estimator: SimpleTokenCountEstimator, text: str) -> list[tuple[str, str, float]]:
    """``(script, run, pieces)`` for each run of ``text`` priced by its pieces."""
    words = estimator._vocabulary.words
    runs = []
    for match in _RUNS.finditer(text):
        kind, run = match.lastgroup or "", match.group()
        if kind == "word" and run not in words:
            script = "cyrillic" if _CYRILLIC.search(run) else "word"
            if run.isascii():
                pieces = sum(1.0 if part in words else estimator._pieces(part) for part in _CASE_PARTS.findall(run))
            else:
                pieces = estimator._pieces(run)
            runs.append((script, run, pieces))
        elif kind in ("han", "kana", "hangul"):
            runs.append((kind, run, estimator._wide_pieces(run)))
    return runs


def piece_rates(encoding_name: str) -> dict[str, float]:
    """The rate per script (keys of :data:`PIECE_RATES`) for ``encoding_name``."""
    reference = reference_encoding(encoding_name)
    estimator = SimpleTokenCountEstimator(encoding_name, cache_size=0)
    per_text: dict[str, list[float]] = {script: [] for script in PIECE_RATES}
    for texts in sentences().values():
        for text in texts:
            real: dict[str, int] = {}
            pieces: dict[str, float] = {}
            for script, run, count in _runs(estimator, text):
                real[script] = real.get(script, 0) + len(reference.encode_ordinary(run))
                pieces[script] = pieces.get(script, 0.0) + count
            for script, count in pieces.items():
                per_text[script].append(real[script] / count)
    return {
        script: math.ceil(statistics.quantiles(ratios, n=10)[-1] * 1000 - 1e-9) / 1000
        for script, ratios in per_text.items()
    }


if __name__ == "__main__":
    for name in ENCODINGS:
        rates = piece_rates(name)
        print(name, ", ".join(f"{PIECE_RATES[script]}={rate}" for script, rate in rates.items()))
