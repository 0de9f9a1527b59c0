"""The fuzz run reaches the same real `rag dev` stack as the black-box tests."""

from integration_support import stack

__all__ = ["stack"]
