"""recompress_batch: another codec around the same records, every other field kept."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.protocol.compression import Compression
from tributary.protocol.errors import CorruptRecordError
from tributary.protocol.records import (
    HEADER_SIZE,
    TRANSACTIONAL_BIT,
    build_batch,
    iter_records,
    parse_batch_header,
    recompress_batch,
    validate_batch,
)

T0 = 1_700_000_000_000
CODECS = list(Compression)
LIMIT = 1 << 24

records = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=10))), max_size=2),
        st.integers(T0 - 1000, T0 + 1000),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(records=records, source=st.sampled_from(CODECS), target=st.sampled_from(CODECS), transactional=st.booleans())
def test_the_records_and_every_other_field_survive(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    source: Compression,
    target: Compression,
    transactional: bool,
) -> None:
    batch = build_batch(
        records, compression=source, producer_id=4001, producer_epoch=3, base_sequence=17,
        is_transactional=transactional,
    )  # fmt: skip
    before = parse_batch_header(batch)
    out = recompress_batch(batch, 0, before, target, max_size=LIMIT)
    after = validate_batch(out)  # its CRC is right
    assert after.compression == target
    assert list(iter_records(out)) == list(iter_records(batch))
    assert after._replace(batch_length=0, crc=0, attributes=0) == before._replace(batch_length=0, crc=0, attributes=0)
    assert after.attributes & ~0x07 == before.attributes & ~0x07
    assert bool(after.attributes & TRANSACTIONAL_BIT) == transactional
    if target == source:
        assert out == batch  # nothing to do: the batch as it came


def test_a_section_that_does_not_decompress_is_corrupt() -> None:
    batch = bytearray(build_batch([(None, b"x" * 1000, [], T0)], compression=Compression.GZIP))
    batch[HEADER_SIZE + 20 :] = b"\x00" * (len(batch) - HEADER_SIZE - 20)
    with pytest.raises(CorruptRecordError):
        recompress_batch(batch, 0, parse_batch_header(batch), Compression.ZSTD, max_size=LIMIT)


def test_a_bomb_stops_at_the_bound() -> None:
    batch = build_batch([(None, b"\x00" * 1_000_000, [], T0)], compression=Compression.ZSTD)
    with pytest.raises(CorruptRecordError):
        recompress_batch(batch, 0, parse_batch_header(batch), Compression.GZIP, max_size=100_000)
