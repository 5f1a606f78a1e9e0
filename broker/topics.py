"""Topic names and topic-level configs, validated the way Kafka validates them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")

#: Topic configs the log honours; anything else is refused with INVALID_CONFIG
#: rather than silently ignored.
TOPIC_CONFIGS = frozenset(
    {
        "retention.ms",
        "retention.bytes",
        "segment.bytes",
        "segment.ms",
        "segment.index.bytes",
        "index.interval.bytes",
        "flush.messages",
        "flush.ms",
        "max.message.bytes",
        "cleanup.policy",
        "compression.type",
        "message.timestamp.type",
    }
)


def topic_name_error(name: str) -> str | None:
    """Why ``name`` is not a legal topic name, or None if it is (Kafka's Topic.validate)."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name is {len(name)} characters long, the limit is {MAX_NAME_LENGTH}"
    if not _LEGAL.fullmatch(name):
        return f"topic name {name!r} may contain only ASCII letters, digits, '.', '_' and '-'"
    return None


def colliding_topics(name: str, existing: Iterable[str]) -> list[str]:
    """The existing topics ``name`` collides with (Kafka's Topic.hasCollision): '.' and
    '_' become the same character in metric names, so Kafka refuses to create
    ``a.b`` next to ``a_b``."""
    if "." not in name and "_" not in name:
        return []
    key = name.replace(".", "_")
    return sorted(t for t in existing if t != name and t.replace(".", "_") == key)


def topic_config_error(configs: Mapping[str, str | None]) -> str | None:
    for key, value in configs.items():
        if key not in TOPIC_CONFIGS:
            return f"unknown or unsupported topic config {key!r}"
        if key == "cleanup.policy" and value not in (None, "delete"):
            return "cleanup.policy must be 'delete': compaction is not supported"
        if key == "compression.type" and value not in (None, "producer"):
            return "compression.type must be 'producer': the broker never recompresses"
        if key == "message.timestamp.type" and value not in (None, "CreateTime"):
            return "message.timestamp.type must be 'CreateTime'"
        if key not in ("cleanup.policy", "compression.type", "message.timestamp.type"):
            try:
                int(value or "")
            except ValueError:
                return f"topic config {key!r} must be an integer, got {value!r}"
    return None
