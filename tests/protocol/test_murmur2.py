from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

# kafka-python's package import trips a DeprecationWarning of its own (and
# pytest turns warnings into errors).
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from tributary.protocol.murmur2 import murmur2, partition_for_key

# Apache Kafka's UtilsTest.testMurmur2 (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java).
JAVA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("data", "expected"), JAVA_VECTORS)
def test_matches_kafka_java_utils_murmur2(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


@pytest.mark.parametrize(("data", "expected"), JAVA_VECTORS)
def test_accepts_bytearray_and_memoryview(data: bytes, expected: int) -> None:
    assert murmur2(bytearray(data)) == expected
    assert murmur2(memoryview(b"." + data)[1:]) == expected


@given(st.binary(max_size=300))
def test_matches_kafka_python(data: bytes) -> None:
    # kafka-python returns the same 32 bits as an unsigned value.
    assert murmur2(data) & 0xFFFFFFFF == kafka_python_murmur2(data)
    assert -(2**31) <= murmur2(data) < 2**31


@given(st.binary(max_size=64), st.integers(1, 10_000))
def test_partition_matches_kafka_python_default_partitioner(key: bytes, partitions: int) -> None:
    expected = (kafka_python_murmur2(key) & 0x7FFFFFFF) % partitions
    assert partition_for_key(key, partitions) == expected


def test_partition_for_known_keys() -> None:
    # -973932308 & 0x7fffffff = 1173551340
    assert partition_for_key(b"21", 1) == 0
    assert partition_for_key(b"21", 7) == 1173551340 % 7
    assert partition_for_key(b"abc", 100) == 479470107 % 100


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least one partition"):
        partition_for_key(b"k", 0)
