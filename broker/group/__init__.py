"""The group coordinator: consumer group membership and committed offsets.

Sans-IO at the core, trio at the edge:

- ``placement``: which ``__consumer_offsets`` partition (so which broker) owns a group;
- ``member``, ``group``: a member, and a group's data with its state transitions;
- ``membership``: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the rebalance timers;
- ``consumer_records``, ``consumer_group``, ``reconciliation``, ``consumer_assignors``,
  ``consumer_membership``, ``consumer_classic``: consumer groups (KIP-848: the records, a
  group rebuilt from them, moving a member towards its target, the server assignors,
  ConsumerGroupHeartbeat and its timers, classic members and groups changing type);
- ``offsets``: committed offsets and their expiry rules;
- ``records``: the key and value formats of ``__consumer_offsets`` (Kafka's);
- ``timers``, ``runtime``, ``messages``: deadlines, the per-call context, inputs and outputs;
- ``coordinator``: the state machine for all groups of this broker;
- ``storage``, ``offsets_topic``, ``service``: the logs, the topic, and the trio driver.
"""

# The sans-IO core only: importing the package (broker.config does, for GroupConfig)
# must not pull in trio and the cluster code; the driver is ``broker.group.service``.
from tributary.broker.group.config import GroupConfig
from tributary.broker.group.coordinator import GroupCoordinator
from tributary.broker.group.placement import OFFSETS_TOPIC, partition_for

__all__ = ["OFFSETS_TOPIC", "GroupConfig", "GroupCoordinator", "partition_for"]
