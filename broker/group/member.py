"""One member of a group, as the coordinator sees it."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

#: (protocol name, metadata) in the member's order of preference, as JoinGroup lists them.
Protocols = tuple[tuple[str, bytes], ...]

#: A request waiting for the coordinator's answer (JoinGroup or SyncGroup): the
#: driver's handle, opaque here.
Ticket = int


@dataclass(slots=True, eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    #: The JoinGroup waiting for the rebalance to complete, if any.
    awaiting_join: Ticket | None = None
    #: The SyncGroup waiting for the leader's assignment, if any.
    awaiting_sync: Ticket | None = None
    #: Joined but not yet through a completed rebalance: such a member has no session
    #: yet, so only the new-member join timeout can remove it.
    is_new: bool = False
    protocol_names: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        self.protocol_names = frozenset(name for name, _ in self.protocols)

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def set_protocols(self, protocols: Protocols) -> None:
        self.protocols = protocols
        self.protocol_names = frozenset(name for name, _ in protocols)

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        """Joining again with exactly the same protocols and metadata."""
        return tuple(protocols) == self.protocols

    def vote(self, candidates: Collection[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")
