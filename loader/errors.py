"""The loader's one error type: what an operator reads on stderr."""

from __future__ import annotations


class LoadError(Exception):
    """A run cannot go on; the message is one line naming what and why (no traceback is shown)."""
