"""Tests of the native format and the LangChain4j and OpenAI codecs."""

from __future__ import annotations
