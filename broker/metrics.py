"""The broker's Prometheus metrics: what the request path counts as it goes.

One :class:`BrokerMetrics` per broker, each with its own ``CollectorRegistry``
(never prometheus_client's global one), so several brokers can run in one
process (tests do) without their series mixing.

The hot path stays cheap: a request costs one dict lookup for its cached
``(counter, histogram)`` children plus ``inc`` and ``observe`` (about 1.5 us
together); a produced or fetched topic one dict lookup and ``inc``. Whatever can
be read from the broker's state instead (log sizes, segments, groups, the
ZooKeeper session) is collected at scrape time by
:mod:`broker.metrics_state` and costs nothing between scrapes.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from protocol.messages import API_MESSAGES, ApiKey

#: Request handling time, from the decoded header to the encoded response. Fetch
#: long-polls (max_wait_ms, 500 ms by default) and JoinGroup waits for the other
#: members, so the buckets reach well past a second.
REQUEST_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
#: One fsync round of a partition log (segments, indexes, directory).
FLUSH_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


def api_name(api_key: int) -> str:
    """Kafka's name for an API (``Produce``, ``ApiVersions``), as its JMX metrics use."""
    try:
        request_type = API_MESSAGES[ApiKey(api_key)][0]
    except (KeyError, ValueError):
        return f"Unknown{api_key}"
    return request_type.__name__.removesuffix("Request")


class BrokerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self._requests = Counter(
            "tributary_broker_requests",
            "Requests handled, by API and version",
            ["api", "version"],
            registry=r,
        )
        self._request_seconds = Histogram(
            "tributary_broker_request_duration_seconds",
            "Time to handle a request, from its decoded header to its encoded response (Fetch includes its wait)",
            ["api"],
            buckets=REQUEST_BUCKETS,
            registry=r,
        )
        self._bytes_in = Counter(
            "tributary_broker_bytes_in",
            "Record batch bytes appended by Produce requests, by topic",
            ["topic"],
            registry=r,
        )
        self._bytes_out = Counter(
            "tributary_broker_bytes_out",
            "Record batch bytes returned by Fetch requests, by topic",
            ["topic"],
            registry=r,
        )
        self.connections = Gauge("tributary_broker_connections", "Client connections open now", registry=r)
        self.connections_accepted = Counter(
            "tributary_broker_connections_accepted", "Client connections accepted since start", registry=r
        )
        self._flush_seconds = Histogram(
            "tributary_broker_log_flush_duration_seconds",
            "Time one flush of a partition log spent in fsync (segments, indexes, directory)",
            buckets=FLUSH_BUCKETS,
            registry=r,
        )
        # Label children cached by raw key: .labels() parses and validates its
        # arguments on every call (about 1 us), a dict hit costs a tenth of that.
        self._request_children: dict[tuple[int, int], tuple[Any, Any]] = {}
        self._in_children: dict[str, Any] = {}
        self._out_children: dict[str, Any] = {}

    def request_handled(self, api_key: int, version: int, seconds: float) -> None:
        children = self._request_children.get((api_key, version))
        if children is None:
            name = api_name(api_key)
            children = (self._requests.labels(name, str(version)), self._request_seconds.labels(name))
            self._request_children[(api_key, version)] = children
        children[0].inc()
        children[1].observe(seconds)

    def bytes_in(self, topic: str, size: int) -> None:
        child = self._in_children.get(topic)
        if child is None:
            child = self._in_children[topic] = self._bytes_in.labels(topic)
        child.inc(size)

    def bytes_out(self, topic: str, size: int) -> None:
        child = self._out_children.get(topic)
        if child is None:
            child = self._out_children[topic] = self._bytes_out.labels(topic)
        child.inc(size)

    def flushed(self, seconds: float) -> None:
        """Called by the log after an fsync round, on the flushing worker thread
        (prometheus_client's instruments are thread-safe)."""
        self._flush_seconds.observe(seconds)

    def forget_topics_not_in(self, topics: Collection[str]) -> None:
        """Drops the series of topics no longer in the cluster (deleted), so they
        do not linger until restart. Runs on assignment changes, not per request."""
        for children, metric in ((self._in_children, self._bytes_in), (self._out_children, self._bytes_out)):
            for topic in [t for t in children if t not in topics]:
                del children[topic]
                metric.remove(topic)
