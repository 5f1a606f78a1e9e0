"""Which source topics are mirrored, and what they are called in the aggregate.

Source topic ``T`` becomes ``<alias>.T``. A topic is mirrored when it matches
the include pattern (whole name), does not match the exclude pattern, is not
internal (``__consumer_offsets``, the mirror's own offsets topic, anything
starting with ``__``) and does not start with ``<alias>.`` for this mirror's
alias or any known alias: such a topic is itself a mirrored copy, and copying
it again is how active-active setups loop.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass


def aggregate_topic(alias: str, topic: str) -> str:
    return f"{alias}.{topic}"


def source_of(aggregate: str) -> tuple[str, str] | None:
    """``(alias, source topic)`` of an aggregate topic name, or None if it has no alias prefix."""
    alias, dot, topic = aggregate.partition(".")
    if not dot or not alias or not topic:
        return None
    return alias, topic


@dataclass(frozen=True, slots=True)
class TopicFilter:
    alias: str
    include: re.Pattern[str]
    exclude: re.Pattern[str] | None = None
    known_aliases: frozenset[str] = frozenset()

    def mirrored(self, topic: str) -> bool:
        if topic.startswith("__"):
            return False
        prefix, dot, _ = topic.partition(".")
        if dot and (prefix == self.alias or prefix in self.known_aliases):
            return False
        if not self.include.fullmatch(topic):
            return False
        return not (self.exclude is not None and self.exclude.fullmatch(topic))

    def select(self, topics: Iterable[str]) -> frozenset[str]:
        return frozenset(t for t in topics if self.mirrored(t))


__all__ = ["TopicFilter", "aggregate_topic", "source_of"]
