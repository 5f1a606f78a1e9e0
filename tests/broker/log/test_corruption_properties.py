"""Properties over random damage and random lies: no acknowledged record is ever deleted, no
damaged batch is ever served, and no batch whose header disagrees with its records is appended."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tributary.broker.log.errors import CorruptLogError
from tributary.broker.log.manager import TopicPartition
from tributary.broker.log.scrubber import Scrubber
from tributary.protocol.compression import Compression, compress
from tributary.protocol.errors import ProtocolError
from tributary.protocol.records import HEADER_SIZE, encode_batch_header, iter_batches, verify_crc

from .helpers import NOW, batch, open_log, read_all, values

SEGMENT_BYTES = 1500


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(min_value=0, max_value=2**32 - 1), flips=st.integers(min_value=1, max_value=3))
@example(seed=98699, flips=1)  # a flip of the magic byte to 0 once escaped recovery as UnsupportedMagicError
@example(seed=73411688, flips=1)  # a flip in a baseOffset (outside the CRC) once served a record one offset on
def test_random_damage_while_stopped_deletes_nothing_acknowledged_and_serves_nothing_damaged(
    tmp_path_factory: pytest.TempPathFactory, seed: int, flips: int
) -> None:
    rng = random.Random(seed)
    path = tmp_path_factory.mktemp("log") / "t-0"
    plog = open_log(path, segment_bytes=SEGMENT_BYTES)
    for i in range(30):
        plog.append(batch(rng.randint(1, 3), tag=i, compression=rng.choice(list(Compression))), 0, NOW)
    acknowledged = values(read_all(plog))
    plog.close()  # a clean stop: everything acknowledged is on disk
    files = sorted(path.glob("*.log"))
    for _ in range(flips):
        victim = rng.choice(files)
        data = bytearray(victim.read_bytes())
        if data:
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            victim.write_bytes(data)

    try:
        reopened = open_log(path, clean=True, segment_bytes=SEGMENT_BYTES)
    except CorruptLogError:
        # Offline: the files are as the damage left them, nothing cut.
        assert sorted(path.glob("*.log")) == files
        return
    # Opened: the active segment read back whole; a closed one may still hide damage (a clean
    # start trusts them), which the scrubber finds before anything is deleted.
    found = Scrubber().step({TopicPartition("t", 0): reopened}, 1 << 30)
    if found:
        assert sorted(path.glob("*.log")) == files
        reopened.close()
        return
    served = read_all(reopened)
    for pos, _ in iter_batches(served):
        verify_crc(served, pos)
    assert values(served) == acknowledged
    reopened.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    count=st.integers(min_value=1, max_value=2**31 - 1),
    records=st.lists(st.binary(max_size=30), min_size=1, max_size=6),
    damage=st.tuples(st.integers(min_value=0, max_value=50), st.binary(max_size=8)),
    codec=st.sampled_from(list(Compression)),
)
def test_a_batch_whose_header_and_records_disagree_is_never_appended(
    tmp_path_factory: pytest.TempPathFactory,
    count: int,
    records: list[bytes],
    damage: tuple[int, bytes],
    codec: Compression,
) -> None:
    # Records taken each from a batch of its own (so each has offset delta 0), then cut short
    # and followed by junk; the header claims ``count`` of them, with a valid CRC.
    cut, junk = damage
    honest = b"".join(batch(1, value=r, tag=i)[HEADER_SIZE:] for i, r in enumerate(records))
    section = honest[: max(0, len(honest) - cut)] + junk
    payload = compress(codec, section)
    header = encode_batch_header(
        base_offset=0, partition_leader_epoch=-1, attributes=codec.value, base_timestamp=0, max_timestamp=2**40,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, record_count=count, records=payload,
    )  # fmt: skip
    plog = open_log(tmp_path_factory.mktemp("log") / "t-0")
    try:
        if count == 1 and len(records) == 1 and section == honest:  # the one truthful shape
            assert plog.append(header + payload, 0, NOW).base_offset == 0
            return
        with pytest.raises(ProtocolError):
            plog.append(header + payload, 0, NOW)
        assert plog.log_end_offset == 0
        assert read_all(plog) == b""
    finally:
        plog.close()
