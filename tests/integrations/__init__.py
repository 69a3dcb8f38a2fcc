"""Tests of the framework adapters."""

from __future__ import annotations
