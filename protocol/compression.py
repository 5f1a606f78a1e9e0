"""The compression codecs of record batches, as Kafka clients write them.

Compression applies to the records section of a v2 batch (everything after
the record count). Formats, chosen to match what Kafka's Java client writes
and what every client reads:

* gzip: one RFC 1952 member (several concatenated members are read too).
* snappy: written in the xerial block framing Kafka's Java client uses;
  read in both that framing and plain raw snappy (librdkafka and
  kafka-python write either).
* lz4: the LZ4 frame format with independent 64 KiB blocks and no content
  size or checksum, which is what Kafka's own LZ4 stream writes.
* zstd: standard frames; frames without a content size (streaming writers
  such as the Java client's) are handled.

Decompression is bounded by ``max_size``: output beyond it raises
:class:`CorruptRecordError`, so a small hostile batch cannot expand into
gigabytes. Every malformed input raises :class:`CorruptRecordError`, never a
codec library's own exception. The packages for snappy (``cramjam``), lz4
(``lz4``) and zstd (``zstandard``) are imported on first use; a missing one
raises :class:`CodecUnavailableError` naming it.
"""

from __future__ import annotations

import enum
import importlib
import struct
import sys
import threading
import zlib
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from tributary.protocol.crc32c import BytesLike
from tributary.protocol.errors import CodecUnavailableError, CorruptRecordError


class Compression(enum.IntEnum):
    """The codec ids of attribute bits 0-2 of a v2 record batch."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


#: The default bound on one batch's decompressed records section. Far above
#: any sane batch (brokers default to 1 MiB compressed), far below what would
#: hurt a process.
DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024

# Kafka's Java client defaults (gzip: Deflater.DEFAULT_COMPRESSION; zstd: 3).
# lz4 uses the fast compressor as librdkafka does.
_DEFAULT_GZIP_LEVEL = zlib.Z_DEFAULT_COMPRESSION
_DEFAULT_LZ4_LEVEL = 0
_DEFAULT_ZSTD_LEVEL = 3

_GZIP_WBITS = 16 + zlib.MAX_WBITS  # a gzip header and trailer around deflate

_I32 = struct.Struct(">i")
_U32LE = struct.Struct("<I")

# xerial snappy-java's SnappyOutputStream: a 16-byte header (magic, version 1,
# minimum compatible version 1), then blocks of int32 length + raw snappy.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java's default, which Kafka keeps

_LZ4_BLOCK_SIZE_64KB = 4  # lz4.frame.BLOCKSIZE_MAX64KB, Kafka's block size

_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MAGIC = 0x184D2A50  # with the low 4 bits free
_ZSTD_READ_CHUNK = 1024 * 1024


def _module(codec: str, module: str, package: str) -> ModuleType:
    # Imported per call so that a missing package only fails the batches that need it, and
    # tests can simulate its absence (None in sys.modules). Once loaded, one dict lookup:
    # import_module's own bookkeeping cost 2% of a zstd produce request.
    loaded = sys.modules.get(module)
    if loaded is not None:
        return loaded
    try:
        return importlib.import_module(module)
    except ImportError:
        raise CodecUnavailableError(codec, package) from None


def _too_large(max_size: int) -> CorruptRecordError:
    return CorruptRecordError(f"decompressed records exceed the limit of {max_size} bytes")


# zstd contexts are costly to create (about 10 us, as much as compressing a
# small batch) and not thread-safe, so each thread keeps its own.
_zstd_local = threading.local()


def _zstd_compressor(zstandard: ModuleType, level: int) -> Any:
    cache: dict[int, Any] | None = getattr(_zstd_local, "compressors", None)
    if cache is None:
        cache = _zstd_local.compressors = {}
    compressor = cache.get(level)
    if compressor is None:
        compressor = cache[level] = zstandard.ZstdCompressor(level=level)
    return compressor


def _zstd_decompressor(zstandard: ModuleType) -> Any:
    decompressor = getattr(_zstd_local, "decompressor", None)
    if decompressor is None:
        decompressor = _zstd_local.decompressor = zstandard.ZstdDecompressor()
    return decompressor


# --- gzip -------------------------------------------------------------------


def _gzip_compress(data: BytesLike, level: int | None) -> bytes:
    compressor = zlib.compressobj(_DEFAULT_GZIP_LEVEL if level is None else level, zlib.DEFLATED, _GZIP_WBITS)
    return compressor.compress(data) + compressor.flush()


def _gzip_decompress(data: BytesLike, max_size: int) -> bytes:
    out = bytearray()
    rest: BytesLike = data
    try:
        while True:
            member = zlib.decompressobj(_GZIP_WBITS)
            # One byte more than allowed tells "exactly at the limit" from "over it".
            out += member.decompress(rest, max_size - len(out) + 1)
            if len(out) > max_size:
                raise _too_large(max_size)
            if not member.eof:
                raise CorruptRecordError("gzip data is truncated")
            rest = member.unused_data
            if not rest:
                return bytes(out)
    except zlib.error as exc:
        raise CorruptRecordError(f"invalid gzip data: {exc}") from None


# --- snappy -----------------------------------------------------------------


def _snappy_compress(data: BytesLike, level: int | None) -> bytes:
    snappy = _module("snappy", "cramjam", "cramjam").snappy
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE])
        out += _I32.pack(len(block))
        out += block
    return bytes(out)


def _snappy_blocks(view: memoryview) -> list[memoryview]:
    """The raw snappy blocks of ``view``: xerial-framed, or one raw block."""
    if not (len(view) >= len(_XERIAL_HEADER) and view[: len(_XERIAL_MAGIC)] == _XERIAL_MAGIC):
        return [view]
    # The version fields are not checked: some writers (Redpanda) store
    # them little-endian, and there is only one framing version anyway.
    blocks = []
    pos, end = len(_XERIAL_HEADER), len(view)
    while pos < end:
        if end - pos < _I32.size:
            raise CorruptRecordError("xerial snappy block length is truncated")
        (length,) = _I32.unpack_from(view, pos)
        pos += _I32.size
        if length < 0 or length > end - pos:
            raise CorruptRecordError(f"xerial snappy block of {length} bytes at offset {pos - 4} overruns the data")
        blocks.append(view[pos : pos + length])
        pos += length
    return blocks


def _snappy_decompress(data: BytesLike, max_size: int) -> bytes:
    cramjam = _module("snappy", "cramjam", "cramjam")
    snappy = cramjam.snappy
    blocks = _snappy_blocks(memoryview(data))
    try:
        total = 0
        for block in blocks:
            # The raw format starts with its decompressed length: checking it
            # first keeps a hostile length from allocating anything.
            total += snappy.decompress_raw_len(block)
            if total > max_size:
                raise _too_large(max_size)
        return b"".join([snappy.decompress_raw(block) for block in blocks])
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"invalid snappy data: {exc}") from None


# --- lz4 --------------------------------------------------------------------


def _lz4_compress(data: BytesLike, level: int | None) -> bytes:
    lz4_frame = _module("lz4", "lz4.frame", "lz4")
    return bytes(
        lz4_frame.compress(
            data,
            compression_level=_DEFAULT_LZ4_LEVEL if level is None else level,
            block_size=_LZ4_BLOCK_SIZE_64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    )


def _lz4_decompress(data: BytesLike, max_size: int) -> bytes:
    lz4_frame = _module("lz4", "lz4.frame", "lz4")
    out = bytearray()
    rest: BytesLike | None = data
    try:
        while rest:
            frame = lz4_frame.LZ4FrameDecompressor()
            out += frame.decompress(rest, max_length=max_size - len(out) + 1)
            if len(out) > max_size:
                raise _too_large(max_size)
            if not frame.eof:
                raise CorruptRecordError("lz4 frame is truncated")
            rest = frame.unused_data
    except RuntimeError as exc:  # how the lz4 package reports every LZ4F error
        raise CorruptRecordError(f"invalid lz4 data: {exc}") from None
    return bytes(out)


# --- zstd -------------------------------------------------------------------


def _zstd_compress(data: BytesLike, level: int | None) -> bytes:
    zstandard = _module("zstd", "zstandard", "zstandard")
    return bytes(_zstd_compressor(zstandard, _DEFAULT_ZSTD_LEVEL if level is None else level).compress(data))


def _zstd_frame_count(view: memoryview) -> int:
    """Walks the frame and block headers (RFC 8878) without decoding anything.

    The streaming decoder returns short output rather than an error when the
    input stops mid-frame, so truncation has to be found here."""
    pos, end, frames = 0, len(view), 0
    try:
        while pos < end:
            (magic,) = _U32LE.unpack_from(view, pos)
            if magic & 0xFFFFFFF0 == _ZSTD_SKIPPABLE_MAGIC:
                (size,) = _U32LE.unpack_from(view, pos + 4)
                pos += 8 + size
            elif magic == _ZSTD_MAGIC:
                descriptor = view[pos + 4]
                single_segment = descriptor >> 5 & 1
                content_size_bytes = (single_segment, 2, 4, 8)[descriptor >> 6]
                dictionary_id_bytes = (0, 1, 2, 4)[descriptor & 3]
                pos += 5 + (1 - single_segment) + dictionary_id_bytes + content_size_bytes
                last = 0
                while not last:
                    header = view[pos] | view[pos + 1] << 8 | view[pos + 2] << 16
                    pos += 3
                    last, block_type, block_size = header & 1, header >> 1 & 3, header >> 3
                    if block_type == 3:
                        raise CorruptRecordError(f"zstd block at offset {pos - 3} has the reserved type")
                    pos += 1 if block_type == 1 else block_size  # an RLE block stores one byte
                if descriptor & 4:
                    pos += 4  # content checksum
            else:
                raise CorruptRecordError(f"no zstd frame at offset {pos}")
            frames += 1
    except (IndexError, struct.error):
        raise CorruptRecordError("zstd data is truncated") from None
    if pos > end:
        raise CorruptRecordError("zstd data is truncated")
    return frames


def _zstd_decompress(data: BytesLike, max_size: int) -> bytes:
    zstandard = _module("zstd", "zstandard", "zstandard")
    view = memoryview(data)
    frames = _zstd_frame_count(view)
    decompressor = _zstd_decompressor(zstandard)
    try:
        if frames == 1 and _U32LE.unpack_from(view)[0] == _ZSTD_MAGIC:
            size = zstandard.get_frame_parameters(view).content_size
            if size != zstandard.CONTENTSIZE_UNKNOWN:
                if size > max_size:
                    raise _too_large(max_size)
                # One allocation of the declared size; the decoder checks it.
                return bytes(decompressor.decompress(view))
        chunks = []
        total = 0
        with decompressor.stream_reader(view, read_across_frames=True) as reader:
            while chunk := reader.read(min(_ZSTD_READ_CHUNK, max_size - total + 1)):
                total += len(chunk)
                if total > max_size:
                    raise _too_large(max_size)
                chunks.append(chunk)
        return b"".join(chunks)
    except zstandard.ZstdError as exc:
        raise CorruptRecordError(f"invalid zstd data: {exc}") from None


# --- dispatch ---------------------------------------------------------------

_COMPRESSORS: dict[Compression, Callable[[BytesLike, int | None], bytes]] = {
    Compression.GZIP: _gzip_compress,
    Compression.SNAPPY: _snappy_compress,
    Compression.LZ4: _lz4_compress,
    Compression.ZSTD: _zstd_compress,
}

_DECOMPRESSORS: dict[Compression, Callable[[BytesLike, int], bytes]] = {
    Compression.GZIP: _gzip_decompress,
    Compression.SNAPPY: _snappy_decompress,
    Compression.LZ4: _lz4_decompress,
    Compression.ZSTD: _zstd_decompress,
}


def compress(codec: Compression | int, data: BytesLike, level: int | None = None) -> bytes:
    """Compresses ``data`` as ``codec``; ``level`` is the codec's own scale
    (None: Kafka's default; snappy has no levels and ignores it)."""
    codec = Compression(codec)
    if codec is Compression.NONE:
        return bytes(data)
    return _COMPRESSORS[codec](data, level)


def decompress(codec: Compression | int, data: BytesLike, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
    """Decompresses ``data`` written as ``codec``, refusing output over ``max_size`` bytes."""
    codec = _compressed_input(codec, data)
    if codec is Compression.NONE:
        return bytes(data)
    return _DECOMPRESSORS[codec](data, max_size)


def _compressed_input(codec: Compression | int, data: BytesLike) -> Compression:
    """The codec of a batch's attributes, for ``data`` that claims to be written with it."""
    try:
        codec = Compression(codec)
    except ValueError:
        raise CorruptRecordError(f"unknown compression codec {codec}") from None
    if codec is not Compression.NONE and not len(data):
        # Every codec frames even empty input, so no data at all is corrupt.
        raise CorruptRecordError(f"{codec.name.lower()} data is empty")
    return codec


__all__ = ["DEFAULT_MAX_DECOMPRESSED_SIZE", "Compression", "compress", "decompress"]


# --- decompressing in pieces ---------------------------------------------------------------


def iter_decompressed(
    codec: Compression | int, data: BytesLike, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE, chunk: int = 64 * 1024
) -> Iterator[bytes]:
    """Decompresses ``data`` written as ``codec`` in pieces of at most ``chunk`` bytes (raw
    snappy, which has no framing, in one piece), so a reader that consumes them as they come
    never holds the whole output. More than ``max_size`` bytes in all raises
    :class:`CorruptRecordError` as soon as the piece that crosses it is made."""
    codec = _compressed_input(codec, data)
    if codec is Compression.NONE:
        yield bytes(data)
        return
    total = 0
    for piece in _PIECES[codec](data, chunk, max_size):
        total += len(piece)
        if total > max_size:
            raise _too_large(max_size)
        if piece:
            yield piece


def _gzip_pieces(data: BytesLike, chunk: int, max_size: int) -> Iterator[bytes]:
    rest: BytesLike = data
    try:
        while True:
            member = zlib.decompressobj(_GZIP_WBITS)
            pending: BytesLike = rest
            while not member.eof:
                piece = member.decompress(pending, chunk)
                pending = member.unconsumed_tail
                if not piece and not pending:
                    raise CorruptRecordError("gzip data is truncated")
                yield piece
            rest = member.unused_data
            if not rest:
                return
    except zlib.error as exc:
        raise CorruptRecordError(f"invalid gzip data: {exc}") from None


def _lz4_pieces(data: BytesLike, chunk: int, max_size: int) -> Iterator[bytes]:
    lz4_frame = _module("lz4", "lz4.frame", "lz4")
    rest: BytesLike = data
    try:
        while rest:
            frame = lz4_frame.LZ4FrameDecompressor()
            pending: BytesLike = rest
            while not frame.eof:
                piece = frame.decompress(pending, max_length=chunk)
                pending = b""
                if not piece and frame.needs_input:
                    raise CorruptRecordError("lz4 frame is truncated")
                yield piece
            rest = frame.unused_data
    except RuntimeError as exc:  # how the lz4 package reports every LZ4F error
        raise CorruptRecordError(f"invalid lz4 data: {exc}") from None


def _zstd_pieces(data: BytesLike, chunk: int, max_size: int) -> Iterator[bytes]:
    zstandard = _module("zstd", "zstandard", "zstandard")
    view = memoryview(data)
    _zstd_frame_count(view)  # the stream reader hides truncation; the frame walk finds it
    try:
        with _zstd_decompressor(zstandard).stream_reader(view, read_across_frames=True) as reader:
            while piece := reader.read(chunk):
                yield piece
    except zstandard.ZstdError as exc:
        raise CorruptRecordError(f"invalid zstd data: {exc}") from None


def _snappy_pieces(data: BytesLike, chunk: int, max_size: int) -> Iterator[bytes]:
    # xerial blocks are 32 KiB of output each as Kafka writes them; a raw stream is one block.
    # Each block's declared size is checked against the limit before it is decompressed.
    cramjam = _module("snappy", "cramjam", "cramjam")
    snappy = cramjam.snappy
    total = 0
    try:
        for block in _snappy_blocks(memoryview(data)):
            total += snappy.decompress_raw_len(block)
            if total > max_size:
                raise _too_large(max_size)
            yield bytes(snappy.decompress_raw(block))
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"invalid snappy data: {exc}") from None


_PIECES: dict[Compression, Callable[[BytesLike, int, int], Iterator[bytes]]] = {
    Compression.GZIP: _gzip_pieces,
    Compression.SNAPPY: _snappy_pieces,
    Compression.LZ4: _lz4_pieces,
    Compression.ZSTD: _zstd_pieces,
}
