"""The dispatcher's table: each API routed to a handler typed with that API's own messages."""

from __future__ import annotations

import types
import typing

from tributary.broker.dispatch import ROUTES, advertised_versions
from tributary.protocol.messages import API_MESSAGES, ApiKey
from tributary.protocol.supported import SUPPORTED_VERSIONS


def _declared(route: object) -> tuple[type, set[type]]:
    """The request type and the response types (None left out) a route was declared with."""
    request, response = typing.get_args(route.__orig_class__)  # type: ignore[attr-defined]
    responses = set(typing.get_args(response)) if isinstance(response, types.UnionType) else {response}
    return request, responses - {type(None)}


def test_every_route_is_typed_with_its_own_apis_request_and_response() -> None:
    for key, route in ROUTES.items():
        request, responses = _declared(route)
        assert (request, responses) == (API_MESSAGES[key][0], {API_MESSAGES[key][1]}), key.name


def test_only_produce_may_answer_nothing() -> None:
    silent = {
        key for key, route in ROUTES.items() if type(None) in typing.get_args(typing.get_args(route.__orig_class__)[1])
    }  # type: ignore[attr-defined]
    assert silent == {ApiKey.PRODUCE}


def test_advertised_is_every_routed_api_at_its_supported_range() -> None:
    advertised = {v.api_key: (v.min_version, v.max_version) for v in advertised_versions()}
    assert set(advertised) == set(ROUTES)
    assert advertised == {key: (SUPPORTED_VERSIONS[key].lo, SUPPORTED_VERSIONS[key].hi) for key in ROUTES}
    # A table without a route for an API does not advertise it.
    assert ApiKey.FETCH not in {v.api_key for v in advertised_versions({ApiKey.METADATA: object()})}
