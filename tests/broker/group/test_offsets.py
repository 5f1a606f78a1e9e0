"""Committed offsets: commits, fetches, persistence in the log, failover and expiry."""

from __future__ import annotations

import dataclasses

from tributary.broker.group.offsets import OffsetAndMetadata
from tributary.broker.group.records import GroupKey, OffsetKey, decode_key, encode_offset_key
from tributary.protocol import codec
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import ConsumerProtocolSubscription

from .harness import CONFIG, SESSION, Harness

RETENTION = CONFIG.offsets_retention_ms
CHECK = CONFIG.offsets_retention_check_interval_ms


def subscription(*topics: str) -> tuple[tuple[str, bytes], ...]:
    body = codec.encode(ConsumerProtocolSubscription(topics=list(topics)), 1)
    return (("range", b"\x00\x01" + body),)


def tombstones(h: Harness, partition: int) -> list[object]:
    return [decode_key(key) for key, value in h.log[partition] if value is None]


def test_commit_and_fetch_without_group_management() -> None:
    h = Harness()
    value = OffsetAndMetadata(42, leader_epoch=3, metadata="checkpoint 7")
    errors = h.commit_errors(h.commit({("t", 0): value, ("t", 1): 7}))
    assert errors == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.NONE}
    fetched = h.coordinator.fetch_offsets("g", [("t", 0), ("t", 1), ("t", 2), ("u", 0)])
    assert fetched.error == ErrorCode.NONE
    got = fetched.offsets[("t", 0)]
    assert got is not None
    assert (got.offset, got.leader_epoch, got.metadata, got.commit_timestamp) == (42, 3, "checkpoint 7", h.now)
    assert fetched.offsets[("t", 2)] is None and fetched.offsets[("u", 0)] is None
    assert set(h.coordinator.fetch_offsets("g", None).offsets) == {("t", 0), ("t", 1)}
    assert h.coordinator.fetch_offsets("other", None).offsets == {}
    # The group exists now, Empty, with no protocol: a group used for offsets only.
    assert h.coordinator.describe("g").state == "Empty"


def test_commits_are_written_to_the_groups_partition() -> None:
    h = Harness()
    h.commit({("t", 0): 1, ("t", 1): 2})
    partition = h.coordinator.partition_for("g")
    assert [decode_key(k) for k, _ in h.log[partition]] == [OffsetKey("g", "t", 0), OffsetKey("g", "t", 1)]
    assert all(not h.log[p] for p in h.log if p != partition)


def test_commit_waits_for_the_write_and_fails_with_it() -> None:
    h = Harness()
    h.hold_writes = True
    ticket = h.commit({("t", 0): 1})
    assert h.pending(ticket)
    assert h.committed(("t", 0)) is None, "not visible before it is in the log"
    h.release_writes()
    assert h.commit_errors(ticket) == {("t", 0): ErrorCode.NONE}
    assert h.committed(("t", 0)) == 1

    h.write_error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert h.commit_errors(h.commit({("t", 0): 2})) == {("t", 0): ErrorCode.NOT_COORDINATOR}
    h.write_error = ErrorCode.MESSAGE_TOO_LARGE
    assert h.commit_errors(h.commit({("t", 0): 2})) == {("t", 0): ErrorCode.INVALID_COMMIT_OFFSET_SIZE}
    assert h.committed(("t", 0)) == 1


def test_metadata_too_large_is_refused_per_partition() -> None:
    h = Harness()
    big = OffsetAndMetadata(1, metadata="x" * (CONFIG.offset_metadata_max_bytes + 1))
    errors = h.commit_errors(h.commit({("t", 0): big, ("t", 1): 5}))
    assert errors == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE, ("t", 1): ErrorCode.NONE}


def test_member_commits_and_reset_consumption() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2)
    assert h.commit_errors(h.commit({("t", 0): 10}, member_id=a, generation=generation)) == {("t", 0): ErrorCode.NONE}
    assert h.committed(("t", 0)) == 10
    # Committing counts as a sign of life, like a heartbeat.
    for _ in range(3):
        h.advance(SESSION // 2)
        h.commit({("t", 0): 11}, member_id=a, generation=generation)
        h.heartbeat(b, generation)
    assert h.heartbeat(a, generation) == ErrorCode.NONE


def test_offsets_and_group_survive_a_failover() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2)
    h.commit({("t", 0): 10, ("t", 1): 20}, member_id=a, generation=generation)
    h.commit({("t", 0): 15}, member_id=b, generation=generation)

    # Another coordinator (or this one restarted) reads the same log.
    other = Harness(load=False)
    other.now = h.now + 1000
    other.log = h.log
    for partition in range(CONFIG.offsets_topic_partitions):
        other.load(partition)
    assert other.committed(("t", 0)) == 15 and other.committed(("t", 1)) == 20
    summary = other.coordinator.describe("g")
    assert summary.state == "Stable"
    assert [m.member_id for m in summary.members] == [a, b]
    # The members carry on in their generation, with their assignments.
    assert other.heartbeat(a, generation) == ErrorCode.NONE
    assert other.sync_result(other.sync(b, generation)).assignment == b"a-" + b.encode()
    assert other.commit_errors(other.commit({("t", 1): 21}, member_id=b, generation=generation)) == {
        ("t", 1): ErrorCode.NONE
    }
    # A member that does not come back expires as usual, and the next generation follows.
    other.advance(SESSION // 2)
    assert other.heartbeat(a, generation) == ErrorCode.NONE
    other.advance(SESSION // 2)
    assert other.heartbeat(a, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    rejoin = other.join_result(other.join(a))
    assert rejoin.generation_id == generation + 1


def test_loading_skips_unreadable_records_and_honours_tombstones() -> None:
    h = Harness()
    h.commit({("t", 0): 1, ("t", 1): 2})
    partition = h.coordinator.partition_for("g")
    h.log[partition] += [
        (b"\x00\x07garbage", b"x"),
        (encode_offset_key("g", "t", 1), None),
        (encode_offset_key("g", "t", 0), b"\x00\x03short"),
    ]
    h.load(partition)
    assert h.committed(("t", 0)) == 1
    assert h.committed(("t", 1)) is None


def test_offsets_of_an_empty_group_expire_after_the_retention_period() -> None:
    h2 = Harness()
    partition = h2.coordinator.partition_for("g")
    (a,), generation = h2.form_group(1)
    h2.commit({("t", 0): 5}, member_id=a, generation=generation)
    h2.leave(a)
    assert h2.coordinator.describe("g").state == "Empty"
    h2.advance(RETENTION - CHECK)
    assert h2.committed(("t", 0)) == 5
    h2.advance(2 * CHECK)
    assert h2.committed(("t", 0)) is None
    assert h2.coordinator.describe("g").state == "Dead"
    assert tombstones(h2, partition) == [OffsetKey("g", "t", 0), GroupKey("g")]
    # After a reload, nothing comes back.
    h2.load(partition)
    assert h2.committed(("t", 0)) is None and "g" not in h2.coordinator.groups


def test_retention_counts_from_when_the_group_became_empty() -> None:
    h = Harness()
    (a,), generation = h.form_group(1)
    h.commit({("t", 0): 5}, member_id=a, generation=generation)
    # Alive, committing nothing, for longer than the retention period.
    for _ in range(RETENTION // (SESSION // 2) + 1):
        h.advance(SESSION // 2)
        h.heartbeat(a, generation)
    assert h.committed(("t", 0)) == 5
    h.leave(a)
    h.advance(RETENTION - CHECK)
    assert h.committed(("t", 0)) == 5
    h.advance(2 * CHECK)
    assert h.committed(("t", 0)) is None


def test_simple_consumer_offsets_expire_from_their_commit() -> None:
    h = Harness()
    h.commit({("t", 0): 1})
    h.advance(RETENTION // 2)
    h.commit({("t", 1): 1})
    h.advance(RETENTION // 2 + CHECK)
    assert h.committed(("t", 0)) is None
    assert h.committed(("t", 1)) == 1
    h.advance(RETENTION // 2)
    assert "g" not in h.coordinator.groups
    # A group that only stored offsets never wrote metadata: no group tombstone.
    assert GroupKey("g") not in tombstones(h, h.coordinator.partition_for("g"))


def test_stable_group_loses_offsets_of_topics_it_no_longer_reads() -> None:
    h = Harness()
    (a,), generation = h.form_group(1, protocols=subscription("kept"))
    h.commit({("kept", 0): 1, ("dropped", 0): 2}, member_id=a, generation=generation)
    for _ in range(RETENTION // (SESSION // 2) + CHECK // (SESSION // 2) + 1):
        h.advance(SESSION // 2)
        h.heartbeat(a, generation)
    assert h.committed(("kept", 0)) == 1
    assert h.committed(("dropped", 0)) is None


def test_commit_with_its_own_retention_time() -> None:
    h = Harness()
    h.commit({("t", 0): 1}, retention_ms=CHECK)
    stored = h.coordinator.fetch_offsets("g", [("t", 0)]).offsets[("t", 0)]
    assert stored is not None and stored.expire_timestamp == stored.commit_timestamp + CHECK
    h.advance(CHECK)
    assert h.committed(("t", 0)) is None


def test_offset_under_commit_is_not_expired() -> None:
    h = Harness()
    h.commit({("t", 0): 1})
    h.advance(RETENTION - 1)
    h.hold_writes = True
    ticket = h.commit({("t", 0): 2})
    h.hold_writes = False
    h.advance(CHECK)
    h.release_writes()
    assert h.commit_errors(ticket) == {("t", 0): ErrorCode.NONE}
    assert h.committed(("t", 0)) == 2


def test_commit_timestamp_is_the_coordinators() -> None:
    h = Harness()
    h.commit({("t", 0): dataclasses.replace(OffsetAndMetadata(3), commit_timestamp=1)})
    stored = h.coordinator.fetch_offsets("g", [("t", 0)]).offsets[("t", 0)]
    assert stored is not None and stored.commit_timestamp == h.now


def test_deleting_a_topic_removes_its_offsets() -> None:
    h = Harness()
    h.commit({("gone", 0): 1, ("kept", 0): 2})
    h.commit({("gone", 1): 3}, group="only-gone")
    h.apply(h.coordinator.remove_topic_offsets(h.now, {"gone"}))
    assert h.committed(("gone", 0)) is None and h.committed(("kept", 0)) == 2
    assert "only-gone" not in h.coordinator.groups
    assert OffsetKey("g", "gone", 0) in tombstones(h, h.coordinator.partition_for("g"))
    assert OffsetKey("only-gone", "gone", 1) in tombstones(h, h.coordinator.partition_for("only-gone"))
