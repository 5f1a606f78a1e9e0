"""ApiVersions negotiation, sans-IO: shared by the Trio connection and the blocking fetcher.

A connection first sends ApiVersions v3 (flexible). A broker that does not
know v3 answers UNSUPPORTED_VERSION with a **v0** body listing what it
supports, so the answer's error code is read before the body is decoded at
any version: on UNSUPPORTED_VERSION the body is decoded as v0 and the request
is sent again at the highest ApiVersions version both sides know, as
librdkafka does.

Afterwards each request goes out at the highest version both sides support:
ours are :data:`protocol.supported.CLIENT_VERSIONS` (every one round-trips
through the codec), clipped to the broker's advertised range.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from tributary.client.config import CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION
from tributary.client.errors import KafkaProtocolError, UnsupportedVersionError, error_for
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.errors import ProtocolError
from tributary.protocol.headers import decode_response
from tributary.protocol.messages import ApiKey, ApiVersionsRequest, ApiVersionsResponse
from tributary.protocol.supported import CLIENT_VERSIONS

#: The ApiVersions version a connection tries first.
FIRST_API_VERSIONS_VERSION = 3
_ERROR_CODE = struct.Struct(">h")
# A v0 response header is the correlation id alone; the body starts with the error code.
_BODY_START = 4


def _our_range(api_key: int) -> tuple[int, int] | None:
    versions = CLIENT_VERSIONS.get(api_key)  # type: ignore[call-overload]
    if versions is None:
        return None
    return versions.lo, versions.hi if versions.hi is not None else versions.lo


def api_versions_request() -> ApiVersionsRequest:
    return ApiVersionsRequest(
        client_software_name=CLIENT_SOFTWARE_NAME, client_software_version=CLIENT_SOFTWARE_VERSION
    )


def decode_api_versions(frame: bytes | memoryview, sent_version: int) -> tuple[int, ApiVersionsResponse, int]:
    """(correlation id, response, version it was decoded at) of an ApiVersions answer.

    An UNSUPPORTED_VERSION answer is decoded as v0, whatever version was sent."""
    if len(frame) < _BODY_START + _ERROR_CODE.size:
        raise KafkaProtocolError(f"ApiVersions response of {len(frame)} bytes is too short")
    (code,) = _ERROR_CODE.unpack_from(frame, _BODY_START)
    version = 0 if code == ErrorCode.UNSUPPORTED_VERSION else sent_version
    try:
        correlation_id, response = decode_response(ApiKey.API_VERSIONS, version, frame)
    except ProtocolError as exc:
        raise KafkaProtocolError(f"malformed ApiVersions v{version} response: {exc}") from exc
    return correlation_id, response, version


def retry_version(response: ApiVersionsResponse, sent_version: int, broker: int | str) -> int:
    """The ApiVersions version to retry with after an UNSUPPORTED_VERSION answer:
    the highest the broker lists that we also know, always below the one sent."""
    ours = _our_range(ApiKey.API_VERSIONS)
    assert ours is not None
    listed = [k for k in response.api_keys if k.api_key == ApiKey.API_VERSIONS]
    version = min(listed[0].max_version, ours[1]) if listed else 0
    if version >= sent_version or version < 0:
        raise UnsupportedVersionError(
            f"broker {broker} refused ApiVersions v{sent_version} but lists v{version} as its highest", broker=broker
        )
    return version


class BrokerApiVersions:
    """What one broker advertised, and the version to use for each API."""

    __slots__ = ("api_versions_version", "broker", "ranges")

    def __init__(self, ranges: Mapping[int, tuple[int, int]], broker: int | str, api_versions_version: int) -> None:
        self.ranges = dict(ranges)
        self.broker = broker
        #: The ApiVersions version the broker answered (3 unless it downgraded us).
        self.api_versions_version = api_versions_version

    @classmethod
    def from_response(cls, response: ApiVersionsResponse, broker: int | str, version: int) -> BrokerApiVersions:
        if response.error_code:
            raise error_for(response.error_code, broker=broker, context="ApiVersions")
        return cls({k.api_key: (k.min_version, k.max_version) for k in response.api_keys}, broker, version)

    def supports(self, api_key: int) -> bool:
        return self._pick(api_key) is not None

    def _pick(self, api_key: int) -> int | None:
        ours = _our_range(api_key)
        theirs = self.ranges.get(api_key)
        if ours is None or theirs is None:
            return None
        low, high = max(ours[0], theirs[0]), min(ours[1], theirs[1])
        return high if low <= high else None

    def pick(self, api_key: int) -> int:
        """The highest version of ``api_key`` both sides support."""
        version = self._pick(api_key)
        if version is None:
            name = ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else f"API {api_key}"
            theirs = self.ranges.get(api_key)
            ours = _our_range(api_key)
            raise UnsupportedVersionError(
                f"broker {self.broker} supports {name} "
                + (f"v{theirs[0]}-{theirs[1]}" if theirs else "not at all")
                + ", this client "
                + (f"v{ours[0]}-{ours[1]}" if ours else "not at all"),
                broker=self.broker,
            )
        return version

    def check(self, api_key: int, version: int) -> int:
        """``version`` if both sides support it, else UnsupportedVersionError."""
        ours = _our_range(api_key)
        theirs = self.ranges.get(api_key)
        if ours is None or theirs is None or not (ours[0] <= version <= ours[1] and theirs[0] <= version <= theirs[1]):
            raise UnsupportedVersionError(
                f"API key {api_key} v{version} is not supported by both this client ({ours}) "
                f"and broker {self.broker} ({theirs})",
                broker=self.broker,
            )
        return version

    def __repr__(self) -> str:
        return f"BrokerApiVersions(broker={self.broker!r}, apis={len(self.ranges)})"


__all__ = [
    "FIRST_API_VERSIONS_VERSION",
    "BrokerApiVersions",
    "api_versions_request",
    "decode_api_versions",
    "retry_version",
]
