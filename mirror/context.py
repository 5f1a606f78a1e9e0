"""What the mirror's tasks share: both clusters, the flow limits, metrics, links."""

from __future__ import annotations

from dataclasses import dataclass, field

import trio

from tributary.client.admin.admin import Admin
from tributary.client.group.consumer_protocol import ConsumerProtocolMember
from tributary.client.group.membership import GroupMember
from tributary.client.raw.client import RawClient
from tributary.client.wire.cluster import Cluster
from tributary.mirror.checkpoint import CheckpointStore
from tributary.mirror.config import MirrorConfig
from tributary.mirror.flow import ByteBudget, Throttle
from tributary.mirror.links import Link
from tributary.mirror.metrics import MirrorMetrics
from tributary.mirror.offset_map_writer import MappingWriter
from tributary.mirror.produce import ProduceMux
from tributary.mirror.topics import AggregateTopics


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

    #: Set by the daemon once it is a group member: see :meth:`wait_for_membership`.
    member: GroupMember | ConsumerProtocolMember | None = None

    def wake_fetcher(self) -> None:
        self.fetch_wanted.set()

    def counted_in(self) -> bool:
        """Whether the source's group coordinator counted this instance in (a completed
        SyncGroup or an accepted heartbeat) within the last four fifths of the session timeout.
        Past that the group may have given this instance's partitions to another, which then
        copies them: producing on would write batches twice. (A margin of a fifth covers clock
        and request delays.)"""
        member = self.member
        if member is None:
            return True
        return trio.current_time() - member.last_contact <= self.config.session_timeout_ms / 1000 * 0.8

    async def wait_for_membership(self) -> None:
        """Return at once while :meth:`counted_in`; otherwise wait until the coordinator counts
        this instance in again."""
        while not self.counted_in():
            assert self.member is not None
            await self.member.wait_for_contact()


__all__ = ["MirrorContext"]
