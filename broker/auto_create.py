"""Whether a Metadata request may create the topic it names: a sans-IO policy.

Auto-creation turns any client's typo, and any attacker's loop, into topics: znodes, partition
directories, open logs on every broker. Three limits, each a clear per-topic error instead of a
broker that runs out of file descriptors or a ZooKeeper that fills up:

- ``auto.create.topics.deny.pattern``: names matching it are never created (POLICY_VIOLATION);
- ``auto.create.topics.max.partitions``: once the cluster holds this many partitions, no more
  are auto-created (POLICY_VIOLATION; CreateTopics, an explicit act, is not limited);
- ``auto.create.topics.max.per.second``: this broker creates at most this many topics a second,
  with a burst of one second's worth. Over it the topic is answered LEADER_NOT_AVAILABLE, what
  Kafka answers while a topic is being created: every client retries that after its backoff,
  so a legitimate burst is slowed down, never failed (THROTTLING_QUOTA_EXCEEDED would be
  Kafka's CreateTopics answer, but several clients treat it as fatal in Metadata).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tributary.protocol.error_codes import ErrorCode


@dataclass
class AutoCreatePolicy:
    #: -1: no cap.
    max_partitions: int = -1
    #: <= 0: no rate limit.
    max_per_second: float = 0.0
    deny: re.Pattern[str] | None = None
    _tokens: float = field(default=0.0, init=False)
    _updated: float | None = field(default=None, init=False)

    def decide(self, name: str, partitions: int, cluster_partitions: int, now: float) -> ErrorCode | None:
        """None if ``name`` (``partitions`` partitions, in a cluster of ``cluster_partitions``)
        may be created at time ``now`` (seconds, monotonic), else the error to answer."""
        if self.deny is not None and self.deny.search(name):
            return ErrorCode.POLICY_VIOLATION
        if self.max_partitions >= 0 and cluster_partitions + partitions > self.max_partitions:
            return ErrorCode.POLICY_VIOLATION
        if self.max_per_second > 0:
            burst = max(1.0, self.max_per_second)
            if self._updated is None:
                self._tokens = burst
            else:
                self._tokens = min(burst, self._tokens + (now - self._updated) * self.max_per_second)
            self._updated = now
            if self._tokens < 1:
                return ErrorCode.LEADER_NOT_AVAILABLE
            self._tokens -= 1
        return None
