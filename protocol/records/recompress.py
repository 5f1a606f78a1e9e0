"""Re-encoding a batch's records section with another codec: what a broker does on append to a
topic whose ``compression.type`` names a codec the producer did not use (Kafka's LogValidator).

Everything else stays as it was: offsets, timestamps, producer id, epoch and sequence, the
transactional bit, the records themselves (byte for byte once decompressed). The header is
written again around the new section, with its CRC. It is the one place a broker decompresses
and compresses on the produce path, and it runs only for such topics.
"""

from __future__ import annotations

from tributary.protocol.compression import Compression, compress, decompress
from tributary.protocol.crc32c import BytesLike
from tributary.protocol.records.header import CODEC_MASK, HEADER_SIZE, BatchHeader, encode_batch_header


def recompress_batch(
    buf: BytesLike, pos: int, header: BatchHeader, codec: Compression, *, max_size: int, level: int | None = None
) -> bytes:
    """The batch at ``pos`` with its records section in ``codec`` (the batch as it is, copied,
    when it is in that codec already). Raises CorruptRecordError when the section does not
    decompress, or inflates past ``max_size``."""
    batch = bytes(memoryview(buf)[pos : pos + header.size])
    if header.compression == codec:
        return batch
    section = memoryview(batch)[HEADER_SIZE:]
    plain = section if header.compression == Compression.NONE else decompress(header.compression, section, max_size)
    records = plain if codec == Compression.NONE else compress(codec, plain, level)
    return encode_batch_header(
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=(header.attributes & ~CODEC_MASK) | codec,
        base_timestamp=header.base_timestamp,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        record_count=header.record_count,
        records=records,
    ) + bytes(records)
