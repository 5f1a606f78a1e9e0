"""The mirror's Prometheus metrics (prometheus-client), one registry per mirror.

Names follow Prometheus conventions: ``tributary_mirror_`` prefix, units in
the name, ``_total`` for counters. The ``topic`` label is the source topic.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge


class MirrorMetrics:
    def __init__(self, registry: CollectorRegistry, *, source: str) -> None:
        self.source = source
        labels = ["source", "topic", "partition"]
        self.lag_records = Gauge(
            "tributary_mirror_lag_records",
            "Records in the source partition not yet copied (source high watermark minus position).",
            labels, registry=registry,
        )  # fmt: skip
        self.lag_seconds = Gauge(
            "tributary_mirror_lag_seconds",
            "Age of the last copied batch's newest record while the partition is behind; 0 when caught up.",
            labels, registry=registry,
        )  # fmt: skip
        self.copied_bytes = Counter(
            "tributary_mirror_copied_bytes", "Batch bytes (compressed) copied into the aggregate.",
            ["source", "topic"], registry=registry,
        )  # fmt: skip
        self.copied_batches = Counter(
            "tributary_mirror_copied_batches", "Batches copied into the aggregate.", ["source", "topic"],
            registry=registry,
        )  # fmt: skip
        self.copied_records = Counter(
            "tributary_mirror_copied_records", "Records copied into the aggregate.", ["source", "topic"],
            registry=registry,
        )  # fmt: skip
        self.errors = Counter(
            "tributary_mirror_errors", "Errors by kind (fetch, produce, commit, link, reconcile, ...).",
            ["source", "kind"], registry=registry,
        )  # fmt: skip
        self.last_copy = Gauge(
            "tributary_mirror_last_copy_timestamp_seconds",
            "When a batch was last acknowledged by the aggregate (Unix time).", ["source"], registry=registry,
        )  # fmt: skip
        self.since_last_copy = Gauge(
            "tributary_mirror_seconds_since_last_copy",
            "Seconds since a batch was last acknowledged by the aggregate (since start if none yet).",
            ["source"], registry=registry,
        )  # fmt: skip
        self.assigned = Gauge(
            "tributary_mirror_assigned_partitions", "Source partitions this instance copies.", ["source"],
            registry=registry,
        )  # fmt: skip
        self.link_up = Gauge(
            "tributary_mirror_link_up", "1 while the last request to that side succeeded.", ["source", "side"],
            registry=registry,
        )  # fmt: skip
        self._copied: dict[str, tuple[Any, ...]] = {}
        self._started = time.time()
        self._last_copy: float | None = None
        self._last_copy_child = self.last_copy.labels(source)
        self.since_last_copy.labels(source).set_function(self._seconds_since_last_copy)
        self.assigned.labels(source).set(0)
        for side in ("source", "target"):
            self.link_up.labels(source, side).set(0)

    def _seconds_since_last_copy(self) -> float:
        return time.time() - (self._last_copy if self._last_copy is not None else self._started)

    def copied(self, topic: str, *, batches: int, records: int, size: int) -> None:
        children = self._copied.get(topic)
        if children is None:
            # Looked up once per topic: labels() takes a lock and builds a key every call.
            children = self._copied[topic] = tuple(
                c.labels(self.source, topic) for c in (self.copied_bytes, self.copied_batches, self.copied_records)
            )
        children[0].inc(size)
        children[1].inc(batches)
        children[2].inc(records)
        self._last_copy = time.time()
        self._last_copy_child.set(self._last_copy)

    def error(self, kind: str) -> None:
        self.errors.labels(self.source, kind).inc()

    def lag(self, topic: str, partition: int, *, records: int, seconds: float) -> None:
        self.lag_records.labels(self.source, topic, str(partition)).set(records)
        self.lag_seconds.labels(self.source, topic, str(partition)).set(seconds)

    def forget_partition(self, topic: str, partition: int) -> None:
        for gauge in (self.lag_records, self.lag_seconds):
            with contextlib.suppress(KeyError):
                gauge.remove(self.source, topic, str(partition))


__all__ = ["MirrorMetrics"]
