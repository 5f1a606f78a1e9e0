"""Messages declared as data.

Each Kafka message is a Python class (a :class:`StructValue`) plus a :class:`Message`
spec that says, field by field, what Apache Kafka's JSON definition says: the wire
type, the versions a field exists in, which versions may carry null, which carry it
as a tagged field. The codec (``codec.py``) interprets these specs; nothing about a
particular message is written twice.

The declarations in ``protocol/messages/`` are generated from the JSON files by
``tools/generate_messages.py``; ``tests/protocol/test_schema_conformance.py``
checks them against the JSON files again.
"""

from __future__ import annotations

import reprlib
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


class StructValue:
    """The base of every generated message and struct class.

    A generated class names its fields in ``__slots__``, in wire order, and writes out
    its ``__init__`` (every parameter has the field's default). From the slots this base
    derives what ``@dataclass(slots=True)`` would have given: ``==`` compares two
    instances of the same class field by field (another class: ``NotImplemented``),
    instances are unhashable, ``repr`` reads
    ``ProduceRequest.TopicProduceData(name='t', partition_data=[])`` and
    ``__match_args__`` is the fields. The classes are not dataclasses because making one
    generates and compiles its methods at every import: for the few hundred generated
    classes that was a fifth of a broker's start-up CPU (docs/benchmarks.md); written
    out, they are compiled once, into the ``.pyc``.
    """

    __slots__: tuple[str, ...] = ()
    __match_args__: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls.__match_args__ = cls.__slots__  # type: ignore[misc]  # mypy takes it for a constant

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        # Lists compare as a dataclass's tuples do: identity first, then ==.
        return [getattr(self, name) for name in self.__slots__] == [getattr(other, name) for name in self.__slots__]

    # Mutable and compared by value: unhashable, as a dataclass with eq and without frozen.
    __hash__ = None  # type: ignore[assignment]

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{self.__class__.__qualname__}({fields})"


class _Fresh:
    __slots__ = ()

    def __repr__(self) -> str:
        return "FRESH"


#: The default of a generated ``__init__``'s list and struct parameters: the instance gets a
#: new empty list or struct of its own, as from a dataclass field's ``default_factory``.
#: Typed ``Any`` so that it can be the default of a parameter of any type.
FRESH: Any = _Fresh()


class Declared(Protocol):
    """What every generated top-level message class provides."""

    SPEC: ClassVar[Message]
