"""Fixtures for the black-box tests; the machinery lives in integration_support."""

from integration_support import stack, unique

__all__ = ["stack", "unique"]
