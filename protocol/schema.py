"""Messages declared as data.

Each Kafka message is a Python dataclass plus a :class:`Message` spec that says,
field by field, what Apache Kafka's JSON definition says: the wire type, the
versions a field exists in, which versions may carry null, which carry it as a
tagged field. The codec (``codec.py``) interprets these specs; nothing about a
particular message is written twice.

The declarations in ``protocol/messages/`` are generated from the JSON files by
``tools/generate_messages.py``; ``tests/protocol/test_schema_conformance.py``
checks them against the JSON files again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range; ``hi=None`` is open-ended, ``lo > hi`` is empty."""

    lo: int
    hi: int | None = None

    def __contains__(self, version: int) -> bool:
        return self.lo <= version and (self.hi is None or version <= self.hi)

    @classmethod
    def parse(cls, text: str | None) -> Versions:
        """Parse Kafka's notation: ``"3+"``, ``"0-11"``, ``"4"``, ``"none"``."""
        if text is None or text == "none":
            return NO_VERSIONS
        if text.endswith("+"):
            return cls(int(text[:-1]))
        if "-" in text:
            lo, hi = text.split("-")
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __str__(self) -> str:
        if self.hi is not None and self.lo > self.hi:
            return "none"
        if self.hi is None:
            return f"{self.lo}+"
        return f"{self.lo}-{self.hi}" if self.lo != self.hi else str(self.lo)


NO_VERSIONS = Versions(1, 0)


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a struct.

    ``type`` is the JSON type string: a primitive (``int32``, ``string``,
    ``records``, ``uuid`` ...), ``[]<primitive>``, ``[]<Struct>`` or a struct name.
    ``default`` is already converted to the Python value.
    """

    attr: str
    json_name: str
    type: str
    versions: Versions
    nullable: Versions = NO_VERSIONS
    tagged: Versions = NO_VERSIONS
    tag: int | None = None
    # Overrides the message's flexible versions for this field (RequestHeader.ClientId).
    flexible: Versions | None = None
    default: Any = None
    ignorable: bool = False
    struct: Struct | None = None

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type


@dataclass(frozen=True, slots=True, eq=False)
class Struct:
    """A struct's Python class and its fields in wire order."""

    cls: type
    fields: tuple[Field, ...]


@dataclass(frozen=True, slots=True, eq=False)
class Message:
    """A top-level message: a request, response, header or data (consumer protocol) struct."""

    name: str
    kind: str
    api_key: int | None
    valid: Versions
    flexible: Versions
    struct: Struct


class Declared(Protocol):
    """What every generated top-level message class provides."""

    SPEC: ClassVar[Message]
