"""What the ACL authorizer counts, as Prometheus metrics on the broker's registry.

Kafka's StandardAuthorizer reports ``authorization-allowed-rate-per-minute``,
``authorization-denied-rate-per-minute`` and ``acls-total-count``; here they are counters (a rate
is Prometheus' job) and a gauge. A denial is counted when it refuses a request something it asked
for by name; resources a request only had filtered away (the topics of an all-topics Metadata
that the principal may not describe) are not failures and are not counted, as Kafka does not log
them either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tributary.protocol.acl import AclOperation, ResourceType


class AuthorizerMetrics(Collector):
    """Counted in plain ints on the trio thread, turned into families at scrape time."""

    def __init__(self, acl_count: Callable[[], int]) -> None:
        self._acl_count = acl_count
        self.allowed = 0
        # (API name, operation, resource type) -> denials.
        self.denied: dict[tuple[str, AclOperation, ResourceType], int] = {}

    def count_allowed(self) -> None:
        self.allowed += 1

    def count_denied(self, api: str, operation: AclOperation, resource_type: ResourceType) -> None:
        key = (api, operation, resource_type)
        self.denied[key] = self.denied.get(key, 0) + 1

    def collect(self) -> Iterator[Metric]:
        denied = CounterMetricFamily(
            "tributary_broker_authorization_denied",
            "Requests refused access to a resource they named, by API, operation and resource type "
            "(each answered with its *_AUTHORIZATION_FAILED code; Kafka's authorization-denied-rate)",
            labels=["api", "operation", "resource_type"],
        )
        for (api, operation, resource_type), count in sorted(self.denied.items()):
            denied.add_metric([api, operation.kafka_name, resource_type.kafka_name], count)
        yield denied
        yield CounterMetricFamily(
            "tributary_broker_authorization_allowed",
            "Authorization checks that allowed access (Kafka's authorization-allowed-rate)",
            self.allowed,
        )
        yield GaugeMetricFamily(
            "tributary_broker_acls", "ACLs in this broker's cache (Kafka's acls-total-count)", self._acl_count()
        )
