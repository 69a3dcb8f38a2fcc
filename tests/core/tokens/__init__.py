"""Test data for the token estimators: a small multilingual corpus and the reference tokenizers."""

from __future__ import annotations
