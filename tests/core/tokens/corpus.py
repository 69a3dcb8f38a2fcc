"""The multilingual corpus the estimators are calibrated and tested on: shipped sentences, and paragraphs
generated from them with a fixed seed (no download).

``corpus.json`` holds sentences per script; :func:`samples` yields every sentence on its own, paragraphs of
two to six sentences of one script, and mixed-script paragraphs (what a bilingual chat looks like): the
calibration corpus. ``heldout.json`` holds chat messages and tool calls written apart from it, in the same
languages, that no rate is fitted on (:func:`held_out_by_script`, :func:`held_out_tool_calls`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

__all__ = [
    "HELD_OUT_SCRIPTS",
    "SCRIPTS",
    "held_out",
    "held_out_by_script",
    "held_out_tool_calls",
    "samples",
    "sentences",
]

SCRIPTS = ("latin", "cjk", "kana", "cyrillic", "code", "emoji", "digits", "whitespace")
HELD_OUT_SCRIPTS = ("english", "latin", "chinese", "japanese", "korean", "cyrillic", "code", "emoji", "digits", "mixed")


@cache
def sentences() -> dict[str, list[str]]:
    """The shipped sentences, by script."""
    data: dict[str, list[str]] = json.loads((Path(__file__).parent / "corpus.json").read_text(encoding="utf-8"))
    assert tuple(data) == SCRIPTS, tuple(data)
    return data


@cache
def _held_out_data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((Path(__file__).parent / "heldout.json").read_text(encoding="utf-8"))
    assert tuple(data) == (*HELD_OUT_SCRIPTS, "tool_calls"), tuple(data)
    return data


def held_out_by_script() -> dict[str, list[str]]:
    """Chat messages the rates were not fitted on (``heldout.json``), by script (``english``, ``latin``: the
    other Latin-script languages, ``chinese``, ``japanese``, ``korean``, ``cyrillic``, ``code``, ``emoji``,
    ``digits``, and ``mixed``: English beside Chinese, Japanese or Russian in one message).

    They show how the calibration carries over to text it has not seen: keep them out of the fit.
    """
    data = _held_out_data()
    return {script: list(data[script]) for script in HELD_OUT_SCRIPTS}


def held_out() -> list[str]:
    """Every held-out text of :func:`held_out_by_script`, in one list."""
    return [text for texts in held_out_by_script().values() for text in texts]


def held_out_tool_calls() -> list[tuple[str, dict[str, Any], str]]:
    """Held-out tool calls: ``(name, arguments, result)``, arguments and results in several languages."""
    return [(call["name"], call["arguments"], call["result"]) for call in _held_out_data()["tool_calls"]]


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
