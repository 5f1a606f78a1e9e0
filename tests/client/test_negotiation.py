"""ApiVersions negotiation: against our broker, and the v0 downgrade against a fake one.

Our broker understands ApiVersions v3, so the downgrade path (a v0
UNSUPPORTED_VERSION body, then a retry at the highest version the broker
lists) is exercised with a fake broker speaking real protocol bytes over a
memory stream.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from tributary.client.config import ClientConfig
from tributary.client.errors import KafkaConnectionError, UnsupportedVersionError
from tributary.client.wire.connection import connect, open_on_stream
from tributary.client.wire.versions import BrokerApiVersions
from tributary.protocol.messages import ApiKey, MetadataRequest, MetadataResponse
from tributary.protocol.supported import CLIENT_VERSIONS, SUPPORTED_VERSIONS
from tributary.testing.cluster import Cluster

from .fake_broker import FakeBroker


def _hi(api_key: ApiKey) -> int:
    hi = CLIENT_VERSIONS[api_key].hi
    assert hi is not None
    return hi


async def test_negotiates_the_highest_common_versions_with_our_broker(single_broker: Cluster) -> None:
    host, port = single_broker.brokers[0].address
    async with connect(host, port, broker=1) as conn:
        assert conn.versions.api_versions_version == 3
        # Our broker advertises exactly SUPPORTED_VERSIONS for the APIs it handles; the client
        # sends the newest of its own (CLIENT_VERSIONS) within them.
        for api_key, (lo, hi) in conn.versions.ranges.items():
            assert (SUPPORTED_VERSIONS[ApiKey(api_key)].lo, SUPPORTED_VERSIONS[ApiKey(api_key)].hi) == (lo, hi)
            if ApiKey(api_key) in CLIENT_VERSIONS:
                assert conn.api_version(api_key) == min(hi, _hi(ApiKey(api_key)))
        assert conn.api_version(ApiKey.FETCH) == 11
        assert conn.api_version(ApiKey.PRODUCE) == 8
        response: MetadataResponse = await conn.request(MetadataRequest(topics=None))
        assert [b.node_id for b in response.brokers] == [1]


async def _metadata(envelope: Any, request: MetadataRequest) -> MetadataResponse:
    return MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(node_id=7, host="h", port=1)])


@pytest.mark.parametrize(("broker_max", "expected"), [(2, 2), (1, 1), (0, 0)])
async def test_falls_back_to_the_version_a_v0_error_body_lists(broker_max: int, expected: int) -> None:
    ranges = {ApiKey.API_VERSIONS: (0, broker_max), ApiKey.METADATA: (0, 5)}
    fake = FakeBroker(ranges={int(k): v for k, v in ranges.items()}, max_api_versions=broker_max)
    fake.handlers[ApiKey.METADATA] = _metadata
    client_stream, server_stream = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fake.serve, server_stream)
        async with open_on_stream(client_stream, broker="fake") as conn:
            assert conn.versions.api_versions_version == expected
            assert conn.api_version(ApiKey.METADATA) == 5  # clipped to the broker's range
            response: MetadataResponse = await conn.request(MetadataRequest(topics=None))
            assert response.brokers[0].node_id == 7
    api_versions_sent = [version for key, version, _ in fake.seen if key == ApiKey.API_VERSIONS]
    assert api_versions_sent == [3, expected]
    assert (ApiKey.METADATA, 5) in [(key, version) for key, version, _ in fake.seen]


async def test_a_broker_without_common_versions_is_refused_clearly() -> None:
    # The broker knows Fetch only at versions above ours.
    fake = FakeBroker(ranges={ApiKey.API_VERSIONS: (0, 3), ApiKey.FETCH: (_hi(ApiKey.FETCH) + 1, 17)})
    client_stream, server_stream = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fake.serve, server_stream)
        async with open_on_stream(client_stream, broker="fake") as conn:
            assert not conn.versions.supports(ApiKey.FETCH)
            assert not conn.versions.supports(ApiKey.PRODUCE)
            with pytest.raises(UnsupportedVersionError, match=r"broker fake supports FETCH v12-17, this client v4-11"):
                conn.api_version(ApiKey.FETCH)
            with pytest.raises(UnsupportedVersionError, match="PRODUCE not at all"):
                conn.api_version(ApiKey.PRODUCE)


async def test_a_refusal_that_lists_no_lower_version_fails_the_connection() -> None:
    fake = FakeBroker(ranges={ApiKey.API_VERSIONS: (3, 3)}, max_api_versions=2)
    client_stream, server_stream = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fake.serve, server_stream)
        with pytest.raises(UnsupportedVersionError, match="refused ApiVersions v3 but lists v3"):
            async with open_on_stream(client_stream, broker="fake"):
                pass


async def test_a_silent_broker_fails_negotiation_within_the_connect_timeout(autojump_clock: Any) -> None:
    client_stream, server_stream = trio.testing.memory_stream_pair()
    config = ClientConfig(connect_timeout=5)
    with pytest.raises(KafkaConnectionError, match="cannot negotiate versions with broker mute: no ApiVersions answer"):
        async with open_on_stream(client_stream, config=config, broker="mute"):
            pass
    await server_stream.aclose()


def test_version_choice_is_clipped_on_both_sides() -> None:
    versions = BrokerApiVersions({ApiKey.FETCH: (0, 16), ApiKey.METADATA: (1, 3)}, 1, 3)
    assert versions.pick(ApiKey.FETCH) == _hi(ApiKey.FETCH)
    assert versions.pick(ApiKey.METADATA) == 3
    assert versions.check(ApiKey.METADATA, 1) == 1
    with pytest.raises(UnsupportedVersionError):
        versions.check(ApiKey.METADATA, 0)
