"""The log cleaner's metrics, read from its state when Prometheus scrapes (Kafka's
``kafka.log:type=LogCleaner`` and ``LogCleanerManager`` beans under Tributary's names)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tributary.broker.log.cleaner.service import LogCleaner


class CleanerCollector(Collector):
    def __init__(self, cleaner: LogCleaner) -> None:
        self._cleaner = cleaner

    def collect(self) -> Iterator[Metric]:
        stats = self._cleaner.stats
        prefix = "tributary_broker_log_cleaner"
        yield CounterMetricFamily(f"{prefix}_cleans", "Cleans installed", stats.cleans)
        yield CounterMetricFamily(f"{prefix}_failures", "Cleans that failed", stats.failures)
        yield CounterMetricFamily(f"{prefix}_read_bytes", "Bytes the cleaner read", stats.bytes_read)
        yield CounterMetricFamily(f"{prefix}_written_bytes", "Bytes the cleaner wrote", stats.bytes_written)
        yield CounterMetricFamily(f"{prefix}_records_read", "Records the cleaner read", stats.records_read)
        yield CounterMetricFamily(f"{prefix}_records_kept", "Records the cleaner kept", stats.records_kept)
        yield CounterMetricFamily(f"{prefix}_cpu_seconds", "CPU the cleaner's workers spent", stats.cpu_seconds)
        yield GaugeMetricFamily(
            f"{prefix}_max_clean_seconds", "The longest clean (Kafka's max-clean-time-secs)", stats.max_clean_seconds
        )
        yield GaugeMetricFamily(
            f"{prefix}_max_dirty_percent",
            "The dirty share of the filthiest compacted log at the last look (Kafka's max-dirty-percent)",
            stats.max_dirty_percent,
        )
        yield GaugeMetricFamily(
            f"{prefix}_uncleanable_partitions",
            "Compacted logs whose last clean failed, left alone for a while (Kafka's uncleanable-partitions-count)",
            len(self._cleaner.failed),
        )
        yield GaugeMetricFamily(
            f"{prefix}_last_run_timestamp_ms",
            "When the last clean was installed (ms since the epoch)",
            stats.last_run_ms,
        )
