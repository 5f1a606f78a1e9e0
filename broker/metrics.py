"""The broker's Prometheus metrics: what the request path counts as it goes.

One :class:`BrokerMetrics` per broker, each with its own ``CollectorRegistry``
(never prometheus_client's global one), so several brokers can run in one
process (tests do) without their series mixing.

The hot path stays cheap. Requests, bytes and connections are counted in plain
Python ints on the trio thread, and turned into metric families only when
Prometheus scrapes (also on the trio thread: :mod:`broker.metrics_http`), so
no lock is taken: about 1.5 us per request, where prometheus_client's labelled
``Counter`` and ``Histogram`` children (each ``inc``/``observe`` takes a
mutex) cost about three times as much. Flush latency is observed on worker
threads, rarely, so it uses prometheus_client's thread-safe ``Histogram``.
Whatever can be read from the broker's state instead (log sizes, segments,
groups, the ZooKeeper session) is collected at scrape time by
:mod:`broker.metrics_state` and costs nothing between scrapes.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection, Iterator

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from tributary.protocol.messages import API_MESSAGES, ApiKey

#: Request handling time, from the decoded header to the encoded response. Fetch
#: long-polls (max_wait_ms, 500 ms by default) and JoinGroup waits for the other
#: members, so the buckets reach well past a second.
REQUEST_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
_BUCKET_LABELS = tuple(repr(bound) for bound in REQUEST_BUCKETS)
#: One fsync round of a partition log (segments, indexes, directory).
FLUSH_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


def api_name(api_key: int) -> str:
    """Kafka's name for an API (``Produce``, ``ApiVersions``), as its JMX metrics use."""
    try:
        request_type = API_MESSAGES[ApiKey(api_key)][0]
    except (KeyError, ValueError):
        return f"Unknown{api_key}"
    return request_type.__name__.removesuffix("Request")


class _RequestStats:
    """Requests of one API version: a count and a histogram (per-bucket counts,
    made cumulative at scrape time)."""

    __slots__ = ("buckets", "count", "sum")

    def __init__(self) -> None:
        self.count = 0
        self.sum = 0.0
        # buckets[i]: observations <= REQUEST_BUCKETS[i] and > the bound before; the last: above all.
        self.buckets = [0] * (len(REQUEST_BUCKETS) + 1)


class BrokerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._requests: dict[tuple[int, int], _RequestStats] = {}
        self._bytes_in: dict[str, int] = {}
        self._bytes_out: dict[str, int] = {}
        self.connections_open = 0
        self.connections_accepted = 0
        # Refused at once by max.connections / max.connections.per.ip, by Refusal value.
        self.connections_refused: dict[str, int] = {}
        self.connections_closed_idle = 0
        # Closed by the broker for a request it cannot serve (malformed, unsupported, too large).
        self.connections_closed_invalid = 0
        # Authentications by (listener, mechanism or "SSL"); failures by (listener, reason):
        # Kafka's successful-authentication-total / failed-authentication-total.
        self.authentications: dict[tuple[str, str], int] = {}
        self.authentication_failures: dict[tuple[str, str], int] = {}
        # ISR changes this broker wrote as a leader (Kafka's IsrShrinksPerSec / IsrExpandsPerSec).
        self.isr_shrinks = 0
        self.isr_expands = 0
        self._flush_seconds = Histogram(
            "tributary_broker_log_flush_duration_seconds",
            "Time one flush of a partition log spent in fsync (segments, indexes, directory)",
            buckets=FLUSH_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_HotPathCollector(self))

    # --- the request path (trio thread) ------------------------------------------------------

    def request_handled(self, api_key: int, version: int, seconds: float) -> None:
        stats = self._requests.get((api_key, version))
        if stats is None:
            stats = self._requests[(api_key, version)] = _RequestStats()
        stats.count += 1
        stats.sum += seconds
        stats.buckets[bisect_left(REQUEST_BUCKETS, seconds)] += 1

    def bytes_in(self, topic: str, size: int) -> None:
        self._bytes_in[topic] = self._bytes_in.get(topic, 0) + size

    def bytes_out(self, topic: str, size: int) -> None:
        self._bytes_out[topic] = self._bytes_out.get(topic, 0) + size

    def connection_opened(self) -> None:
        self.connections_accepted += 1
        self.connections_open += 1

    def connection_closed(self) -> None:
        self.connections_open -= 1

    def connection_refused(self, reason: str) -> None:
        self.connections_refused[reason] = self.connections_refused.get(reason, 0) + 1

    def connection_idle_closed(self) -> None:
        self.connections_closed_idle += 1

    def connection_closed_invalid(self) -> None:
        self.connections_closed_invalid += 1

    def authenticated(self, listener: str, mechanism: str) -> None:
        key = (listener, mechanism)
        self.authentications[key] = self.authentications.get(key, 0) + 1

    def authentication_failed(self, listener: str, reason: str) -> None:
        key = (listener, reason)
        self.authentication_failures[key] = self.authentication_failures.get(key, 0) + 1

    def isr_changed(self, topic: str, partition: int, shrunk: bool) -> None:
        if shrunk:
            self.isr_shrinks += 1
        else:
            self.isr_expands += 1

    def forget_topics_not_in(self, topics: Collection[str]) -> None:
        """Drops the series of topics no longer in the cluster (deleted), so they
        do not linger until restart. Runs on assignment changes, not per request."""
        for counts in (self._bytes_in, self._bytes_out):
            for topic in [t for t in counts if t not in topics]:
                del counts[topic]

    # --- the log's flushing threads -----------------------------------------------------------

    def flushed(self, seconds: float) -> None:
        """Called by the log after an fsync round, on the flushing worker thread
        (prometheus_client's Histogram is thread-safe)."""
        self._flush_seconds.observe(seconds)

    # --- scrape time (trio thread) --------------------------------------------------------------

    def collect_hot_path(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "tributary_broker_requests", "Requests handled, by API and version", labels=["api", "version"]
        )
        durations = HistogramMetricFamily(
            "tributary_broker_request_duration_seconds",
            "Time to handle a request, from its decoded header to its encoded response (Fetch includes its wait)",
            labels=["api"],
        )
        by_api: dict[str, tuple[list[int], list[float]]] = {}
        for (api_key, version), stats in sorted(self._requests.items()):
            name = api_name(api_key)
            requests.add_metric([name, str(version)], stats.count)
            buckets, total = by_api.setdefault(name, ([0] * len(stats.buckets), [0.0]))
            for i, count in enumerate(stats.buckets):
                buckets[i] += count
            total[0] += stats.sum
        for name, (buckets, total) in by_api.items():
            cumulative, running = [], 0
            for bound, count in zip((*_BUCKET_LABELS, "+Inf"), buckets, strict=True):
                running += count
                cumulative.append((bound, running))
            durations.add_metric([name], cumulative, total[0])
        yield requests
        yield durations
        for direction, counts, what in (
            ("in", self._bytes_in, "appended by Produce requests"),
            ("out", self._bytes_out, "returned by Fetch requests"),
        ):
            family = CounterMetricFamily(
                f"tributary_broker_bytes_{direction}", f"Record batch bytes {what}, by topic", labels=["topic"]
            )
            for topic, size in sorted(counts.items()):
                family.add_metric([topic], size)
            yield family
        yield GaugeMetricFamily("tributary_broker_connections", "Client connections open now", self.connections_open)
        yield CounterMetricFamily(
            "tributary_broker_connections_accepted",
            "Client connections accepted since start",
            self.connections_accepted,
        )
        refused = CounterMetricFamily(
            "tributary_broker_connections_refused",
            "Client connections closed as soon as accepted, by the limit they were over "
            "(max_connections, max_connections_per_ip)",
            labels=["reason"],
        )
        for reason, count in sorted(self.connections_refused.items()):
            refused.add_metric([reason], count)
        yield refused
        yield CounterMetricFamily(
            "tributary_broker_connections_closed_idle",
            "Client connections closed after connections.max.idle.ms with nothing received, sent or in hand",
            self.connections_closed_idle,
        )
        yield CounterMetricFamily(
            "tributary_broker_connections_closed_invalid",
            "Client connections the broker closed for a request it cannot serve: malformed, an unknown API or "
            "version, a frame too large (a TLS client on a plaintext port is one)",
            self.connections_closed_invalid,
        )
        succeeded = CounterMetricFamily(
            "tributary_broker_successful_authentication",
            "Connections that authenticated (SASL, or a TLS client certificate), by listener and mechanism",
            labels=["listener", "mechanism"],
        )
        for (listener, mechanism), count in sorted(self.authentications.items()):
            succeeded.add_metric([listener, mechanism], count)
        yield succeeded
        failed = CounterMetricFamily(
            "tributary_broker_failed_authentication",
            "Connections closed for failing authentication, by listener and reason (bad_credentials, "
            "unsupported_mechanism, malformed, illegal_state, tls_handshake, principal_mapping)",
            labels=["listener", "reason"],
        )
        for (listener, reason), count in sorted(self.authentication_failures.items()):
            failed.add_metric([listener, reason], count)
        yield failed
        yield CounterMetricFamily(
            "tributary_broker_isr_shrinks",
            "ISR shrinks written by this broker as leader (IsrShrinksPerSec)",
            self.isr_shrinks,
        )
        yield CounterMetricFamily(
            "tributary_broker_isr_expands",
            "ISR expansions written by this broker as leader (IsrExpandsPerSec)",
            self.isr_expands,
        )


class _HotPathCollector(Collector):
    def __init__(self, metrics: BrokerMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        return self._metrics.collect_hot_path()
