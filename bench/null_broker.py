"""A broker that stores nothing: the client's ceiling in bench_broker's produce shapes.

It answers ApiVersions, Metadata (every topic asked for exists, one partition, led by itself)
and Produce (acks=1 or all: "appended at offset 0", without looking at the records) from a
thread per connection, every response to what one receive brought in sent with one write. What
a producer reaches against it is what that client can send at most, whatever the broker: a
shape where a real broker comes close to it measures the client, not the broker.

Run as ``python -m bench.null_broker PORT``.
"""

from __future__ import annotations

import socket
import struct
import sys
import threading

from tributary.protocol.headers import decode_request_body, decode_request_header, encode_response
from tributary.protocol.messages import (
    ApiKey,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from tributary.protocol.supported import SUPPORTED_VERSIONS

_LENGTH = struct.Struct(">i")
_ANSWERED = (ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.PRODUCE)
NODE_ID = 1


def _api_versions(version: int, correlation_id: int) -> bytes:
    ranges = {k: SUPPORTED_VERSIONS[k] for k in _ANSWERED}
    keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=v.lo, max_version=v.hi) for k, v in ranges.items()]
    return encode_response(ApiVersionsResponse(error_code=0, api_keys=keys), min(version, 3), correlation_id)


def _metadata(port: int, request: MetadataRequest, version: int, correlation_id: int) -> bytes:
    names = [t.name for t in request.topics or [] if t.name]
    partition = MetadataResponse.MetadataResponsePartition(
        error_code=0, partition_index=0, leader_id=NODE_ID, leader_epoch=0, replica_nodes=[NODE_ID], isr_nodes=[NODE_ID]
    )
    response = MetadataResponse(
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=NODE_ID, host="127.0.0.1", port=port)],
        cluster_id="null",
        controller_id=NODE_ID,
        topics=[MetadataResponse.MetadataResponseTopic(error_code=0, name=n, partitions=[partition]) for n in names],
    )
    return encode_response(response, version, correlation_id)


class _Produced:
    """Produce answers by version and topic, encoded once; the correlation id put in front."""

    def __init__(self) -> None:
        self._bodies: dict[tuple[int, str], bytes] = {}

    def answer(self, request: ProduceRequest, version: int, correlation_id: int) -> bytes:
        name = request.topic_data[0].name
        body = self._bodies.get((version, name))
        if body is None:
            partitions = [ProduceResponse.PartitionProduceResponse(index=0, base_offset=0)]
            topics = [ProduceResponse.TopicProduceResponse(name=name, partition_responses=partitions)]
            frame = encode_response(ProduceResponse(responses=topics), version, 0)
            body = self._bodies[version, name] = frame[8:]  # after the length and correlation id
        return _LENGTH.pack(len(body) + 4) + _LENGTH.pack(correlation_id) + body


def _serve(conn: socket.socket, port: int) -> None:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    produced = _Produced()
    buf = b""
    with conn:
        while data := conn.recv(1 << 20):
            buf += data
            out = []
            pos = 0
            while len(buf) - pos >= 4:
                (size,) = _LENGTH.unpack_from(buf, pos)
                if len(buf) - pos - 4 < size:
                    break
                frame = buf[pos + 4 : pos + 4 + size]
                pos += 4 + size
                envelope = decode_request_header(frame)
                key, version, correlation_id = envelope.api_key, envelope.api_version, envelope.correlation_id
                if key == ApiKey.PRODUCE:
                    request = decode_request_body(envelope, frame)
                    if request.acks != 0:
                        out.append(produced.answer(request, version, correlation_id))
                elif key == ApiKey.API_VERSIONS:
                    out.append(_api_versions(version, correlation_id))
                elif key == ApiKey.METADATA:
                    out.append(_metadata(port, decode_request_body(envelope, frame), version, correlation_id))
                else:
                    return  # not something a producer's benchmark asks: hang up
            buf = buf[pos:]
            if out:
                conn.sendall(b"".join(out))


def main(port: int) -> None:
    with socket.create_server(("127.0.0.1", port)) as server:
        while True:
            conn, _ = server.accept()
            threading.Thread(target=_serve, args=(conn, port), daemon=True).start()


if __name__ == "__main__":
    main(int(sys.argv[1]))
