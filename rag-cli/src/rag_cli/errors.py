"""Errors the CLI's commands raise and turn into a message and exit status 1."""

from __future__ import annotations


class MigrationError(RuntimeError):
    """The store cannot be migrated; the message says why and what to do."""
