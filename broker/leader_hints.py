"""Where a partition's leader is now, for the answers that tell a client it asked the wrong broker.

KIP-951: from Produce v10 and Fetch v12, a partition answered NOT_LEADER_OR_FOLLOWER or
FENCED_LEADER_EPOCH also carries the leader and its epoch as this broker knows them, and the
response (Produce v10+, Fetch v16+) the address of each leader it names, so the client can go
there at once instead of asking for metadata first. Both come from the registry's snapshot, the
same view Metadata answers from; a leader that is not among the live brokers is no leader.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from tributary.broker.cluster.model import ClusterSnapshot
from tributary.protocol.error_codes import ErrorCode

#: The errors that come with a hint (Kafka's: the client then updates its leader).
HINTED_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


class LeaderHint(NamedTuple):
    leader_id: int
    leader_epoch: int


class Endpoint(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None


def leader_hint(snapshot: ClusterSnapshot, topic: str, partition: int) -> LeaderHint:
    """The live leader of the partition and its epoch; (-1, -1) when there is none."""
    state = snapshot.partition(topic, partition)
    if state is None or state.leader not in snapshot.brokers:
        return LeaderHint(-1, -1)
    return LeaderHint(state.leader, state.leader_epoch)


def endpoints(snapshot: ClusterSnapshot, node_ids: Iterable[int], listener: str) -> list[Endpoint]:
    """The addresses on ``listener`` (the one the client came in on) of the named live brokers,
    in id order; a broker without that listener is left out, as Metadata leaves it out."""
    found = []
    for node_id in sorted(set(node_ids)):
        broker = snapshot.brokers.get(node_id)
        address = None if broker is None else broker.address(listener)
        if broker is not None and address is not None:
            found.append(Endpoint(broker.id, address[0], address[1], broker.rack))
    return found
