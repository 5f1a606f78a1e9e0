"""The scrubber: every closed segment re-read with its CRCs, a budget at a time; damage found
once, where it is; the active segment left to the writer."""

from __future__ import annotations

import os
from pathlib import Path

from tributary.broker.log.log import PartitionLog
from tributary.broker.log.manager import TopicPartition
from tributary.broker.log.scrubber import Scrubber

from .helpers import NOW, batch, headers, open_log, read_all

SEGMENT_BYTES = 2000


def _log(path: Path, batches: int = 60) -> PartitionLog:
    log = open_log(path, segment_bytes=SEGMENT_BYTES)
    for i in range(batches):
        log.append(batch(3, tag=i), 0, NOW)
    assert len(log.segments) >= 3
    return log


def _flip(log: PartitionLog, segment_index: int, position: int) -> None:
    path = log.segments[segment_index].log_path
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x40]))
        f.flush()
        os.fsync(f.fileno())


def test_a_pass_checks_every_closed_segment_within_its_budget(tmp_path: Path) -> None:
    logs = {TopicPartition("a", 0): _log(tmp_path / "a-0"), TopicPartition("b", 1): _log(tmp_path / "b-1", 40)}
    closed = sum(s.size for plog in logs.values() for s in plog.segments[:-1])
    largest = max(h.size for plog in logs.values() for h in headers(read_all(plog)))
    scrubber = Scrubber()
    steps, checked = 0, 0
    while scrubber.passes == 0:
        before = scrubber.checked
        assert scrubber.step(logs, 500) == []
        steps += 1
        if scrubber.passes == 0:
            assert scrubber.checked - before <= 500 + largest
            checked = scrubber.checked
    assert checked <= closed
    assert steps >= closed // (500 + largest)
    # The next pass starts over.
    assert scrubber.step(logs, 1 << 30) == [] and scrubber.passes == 2


def test_damage_in_a_closed_segment_is_found_once_where_it_is(tmp_path: Path) -> None:
    plog = _log(tmp_path / "a-0")
    second = plog.segments[2]
    positions = []
    with plog.read(second.base_offset, 1 << 20) as result:
        data = result.read_bytes()
    offset, position = second.base_offset, 0
    for header in headers(data)[:3]:
        positions.append((position, offset))
        position += header.size
        offset = header.next_offset
    # A byte inside the third batch of the third segment.
    bad_position, bad_offset = positions[2]
    _flip(plog, 2, bad_position + 70)
    scrubber = Scrubber()
    found = []
    while scrubber.passes == 0:
        found += scrubber.step({TopicPartition("a", 0): plog}, 300)
    assert len(found) == 1
    key, error = found[0]
    assert key == ("a", 0)
    assert (error.path, error.position, error.offset) == (second.log_path, bad_position, bad_offset)


def test_the_active_segment_is_left_to_the_writer(tmp_path: Path) -> None:
    plog = _log(tmp_path / "a-0")
    _flip(plog, -1, 80)  # recovery checks the active segment; the scrubber does not race the writer
    assert Scrubber().step({TopicPartition("a", 0): plog}, 1 << 30) == []
