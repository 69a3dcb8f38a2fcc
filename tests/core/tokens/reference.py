"""The reference tokenizers: OpenAI's tiktoken over OpenAI's own vocabulary files, offline.

tiktoken downloads its vocabularies at run time and this machine (like CI) cannot. The ``bpe-openai``
wheel ships the very files tiktoken downloads (gzipped): their SHA-256, checked here, equals the hash
tiktoken pins for ``o200k_base`` and ``cl100k_base``. So the reference is tiktoken's own BPE with
tiktoken's own split pattern and vocabulary — an implementation independent of the Rust crate that
:class:`~chatmemory.OpenAITokenCountEstimator` counts with.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
from functools import cache
from importlib import resources
from typing import Any
from unittest import mock

__all__ = ["ENCODINGS", "reference_encoding"]

ENCODINGS = ("o200k_base", "cl100k_base")


@cache
def reference_encoding(name: str) -> Any:
    """A ``tiktoken.Encoding`` for ``name``, built from the vocabulary inside the ``bpe-openai`` wheel."""
    import tiktoken
    from tiktoken_ext import openai_public

    with resources.files("bpe_openai.data").joinpath(f"{name}.tiktoken.gz").open("rb") as packed:
        contents = gzip.decompress(packed.read())
    pinned: dict[str, str] = {}

    def load(url: str, expected_hash: str) -> dict[bytes, int]:
        pinned[url] = expected_hash
        assert hashlib.sha256(contents).hexdigest() == expected_hash, f"{name}: not OpenAI's vocabulary"
        return {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in contents.splitlines())}

    # The constructor in tiktoken_ext names the pattern, special tokens and the pinned hash; only the
    # download is swapped for the bundled file.
    with mock.patch.object(openai_public, "load_tiktoken_bpe", load):
        spec = getattr(openai_public, name)()
    assert pinned, "tiktoken loaded no vocabulary"
    return tiktoken.Encoding(**spec)
