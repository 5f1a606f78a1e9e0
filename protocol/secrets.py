"""Secret settings: passwords and key passphrases, read from files or the environment.

Kafka's config providers, in the two forms operators use: ``${file:/etc/tributary/pw}`` (the
whole file, one trailing newline dropped) and ``${env:NAME}``. A literal value is accepted too,
as in Kafka's properties files, since the file holding it is itself a file; a command line is
never a source (no command takes a secret as an option). A :class:`Secret` never shows its
value: its ``repr`` and ``str`` are ``<hidden>``, so a config object logged or printed in a
traceback leaks nothing. Shared by the broker, the client and the blocking fetcher, which is why
it lives in the stdlib-only foundation package.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_REFERENCE = re.compile(r"^\$\{(file|env):(.+)\}$")


class SecretError(ValueError):
    """A secret that cannot be read; the message names where it was looked for, not its value."""


class Secret:
    """A value that is never printed."""

    __slots__ = ("_value", "source")

    def __init__(self, value: str, source: str = "literal") -> None:
        self._value = value
        #: Where the value came from ("literal", "file /path", "env NAME"): safe to show.
        self.source = source

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret(<hidden>, from {self.source})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __reduce__(self) -> tuple[type[Secret], tuple[str, str]]:
        # Picklable (the loader ships its client settings to Spark executors).
        return (Secret, (self._value, self.source))


def resolve_secret(name: str, value: object) -> Secret:
    """``${file:PATH}``, ``${env:NAME}`` or a literal string, as a Secret; SecretError naming
    the setting ``name`` when the file or variable is missing or the value is not a string."""
    if isinstance(value, Secret):
        return value
    if not isinstance(value, str) or not value:
        raise SecretError(f"setting '{name}' must be a non-empty string (or ${{file:PATH}} / ${{env:NAME}})")
    match = _REFERENCE.match(value)
    if match is None:
        return Secret(value)
    kind, where = match.groups()
    if kind == "env":
        found = os.environ.get(where)
        if not found:
            raise SecretError(f"setting '{name}': environment variable {where} is not set")
        return Secret(found, f"env {where}")
    try:
        text = Path(where).read_text(encoding="utf-8")
    except OSError as exc:
        raise SecretError(f"setting '{name}': cannot read {where}: {exc.strerror or exc}") from None
    text = text[:-1] if text.endswith("\n") else text
    text = text[:-1] if text.endswith("\r") else text
    if not text:
        raise SecretError(f"setting '{name}': {where} is empty")
    return Secret(text, f"file {where}")


__all__ = ["Secret", "SecretError", "resolve_secret"]
