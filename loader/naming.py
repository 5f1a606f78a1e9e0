"""Where an aggregate topic came from: the mirror names its copy of topic T from
datacenter ``alias`` ``<alias>.T`` (an alias has no dot), so the part before
the first dot is the source datacenter and the rest the source topic. A topic
without a dot was not mirrored: it has no source datacenter."""

from __future__ import annotations


def split_topic(topic: str) -> tuple[str | None, str]:
    """``(source datacenter or None, source topic)`` of an aggregate topic name."""
    alias, dot, rest = topic.partition(".")
    if not dot or not alias or not rest:
        return None, topic
    return alias, rest
