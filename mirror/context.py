"""What the mirror's tasks share: both clusters, the flow limits, metrics, links."""

from __future__ import annotations

from dataclasses import dataclass, field

import trio

from client.admin import Admin
from client.cluster import Cluster
from client.raw import RawClient

from .checkpoint import CheckpointStore
from .config import MirrorConfig
from .flow import ByteBudget, Throttle
from .links import Link
from .mapping import MappingWriter
from .metrics import MirrorMetrics
from .produce import ProduceMux
from .topics import AggregateTopics


@dataclass(eq=False)
class MirrorContext:
    config: MirrorConfig
    source: Cluster
    target: Cluster
    mapping: MappingWriter
    metrics: MirrorMetrics
    source_link: Link
    target_link: Link
    budget: ByteBudget
    throttle: Throttle
    topics: AggregateTopics
    checkpoints: CheckpointStore
    producer: ProduceMux
    source_raw: RawClient = field(init=False)
    target_raw: RawClient = field(init=False)
    source_admin: Admin = field(init=False)
    target_admin: Admin = field(init=False)
    #: Set when the fetcher should look again for partitions ready to fetch.
    fetch_wanted: trio.Event = field(default_factory=trio.Event)

    def __post_init__(self) -> None:
        self.source_raw = RawClient(self.source)
        self.target_raw = RawClient(self.target)
        self.source_admin = Admin(self.source)
        self.target_admin = Admin(self.target)

    def wake_fetcher(self) -> None:
        self.fetch_wanted.set()


__all__ = ["MirrorContext"]
