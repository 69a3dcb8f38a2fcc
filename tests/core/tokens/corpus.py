"""The multilingual corpus the estimators are calibrated and tested on: shipped sentences, and paragraphs
generated from them with a fixed seed (no download).

``corpus.json`` holds sentences per script; :func:`samples` yields every sentence on its own, paragraphs of
two to six sentences of one script, and mixed-script paragraphs (what a bilingual chat looks like).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from functools import cache
from pathlib import Path

__all__ = ["SCRIPTS", "held_out", "samples", "sentences"]

SCRIPTS = ("latin", "cjk", "kana", "cyrillic", "code", "emoji", "digits", "whitespace")


@cache
def sentences() -> dict[str, list[str]]:
    """The shipped sentences, by script."""
    data: dict[str, list[str]] = json.loads((Path(__file__).parent / "corpus.json").read_text(encoding="utf-8"))
    assert tuple(data) == SCRIPTS, tuple(data)
    return data


@cache
def held_out() -> list[str]:
    """Sentences in the same languages that the rates were not fitted on (``heldout.json``).

    They show how the calibration carries over to text it has not seen: keep them out of the fit.
    """
    texts: list[str] = json.loads((Path(__file__).parent / "heldout.json").read_text(encoding="utf-8"))
    return texts


def samples(paragraphs_per_script: int = 20, mixed: int = 40, seed: int = 17) -> Iterator[tuple[str, str]]:
    """``(script, text)`` pairs: each sentence, generated paragraphs per script, and mixed paragraphs."""
    rng = random.Random(seed)
    data = sentences()
    for script, texts in data.items():
        for text in texts:
            yield script, text
        joiner = "\n\n" if script == "code" else "\n" if script == "whitespace" else " "
        for _ in range(paragraphs_per_script):
            yield script, joiner.join(rng.choices(texts, k=rng.randint(2, 6)))
    for _ in range(mixed):
        picked = [rng.choice(data[rng.choice(SCRIPTS)]) for _ in range(rng.randint(2, 5))]
        yield "mixed", rng.choice((" ", "\n")).join(picked)
