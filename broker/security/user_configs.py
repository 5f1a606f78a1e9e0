"""Users' SCRAM credentials in ZooKeeper, laid out as Kafka's ZooKeeper mode keeps them.

``/config/users/<sanitized name>`` holds ``{"version":1,"config":{"SCRAM-SHA-512":"salt=...,
stored_key=...,server_key=...,iterations=4096"}}`` (other keys of a user's config, quotas, are
kept as they are), and every change is announced by a sequential node
``/config/changes/config_change_<n>`` holding ``{"version":2,"entity_path":"users/<sanitized>"}``,
which every broker watches (Kafka's ZkNodeChangeNotificationListener). Names are URL-encoded as
Kafka's ``Sanitizer`` does. Pure functions, shared by the brokers' cache and by
``tributary users --zookeeper``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from urllib.parse import unquote_plus

from tributary.broker.cluster.znodes import MalformedZnodeError, decode_config, encode_config
from tributary.protocol.sasl.scram import MECHANISMS, ScramCredential, ScramError, format_credential, parse_credential

CONFIG_USERS = "/config/users"
CONFIG_CHANGES = "/config/changes"
CHANGE_PREFIX = "config_change_"
CHANGE_VERSION = 2
#: Notifications older than this are deleted by the brokers that read them (Kafka: 15 minutes).
CHANGE_EXPIRATION_MS = 15 * 60 * 1000

_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: Java's URLEncoder, then "*" as %2A and " " as %20."""
    return "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in name.encode("utf-8"))


def desanitize(node: str) -> str:
    return unquote_plus(node)


def user_path(name: str) -> str:
    return f"{CONFIG_USERS}/{sanitize(name)}"


def entity_path(name: str) -> str:
    return f"users/{sanitize(name)}"


def encode_change(name: str) -> bytes:
    return json.dumps({"version": CHANGE_VERSION, "entity_path": entity_path(name)}, separators=(",", ":")).encode()


def decode_change(data: bytes) -> tuple[str, str] | None:
    """(entity type, desanitized name) of a notification (versions 1 and 2); None when malformed."""
    try:
        value = json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(value, dict):
        return None
    if value.get("version") == 1:
        kind, name = value.get("entity_type"), value.get("entity_name")
    else:
        path = value.get("entity_path")
        if not isinstance(path, str):
            return None
        kind, _, name = path.partition("/")
        # users/<user>/clients/<client id>: a quota, not a credential.
        if "/" in (name or ""):
            return None
    if not isinstance(kind, str) or not isinstance(name, str) or not name:
        return None
    return kind, desanitize(name)


def change_sequence(node: str) -> int | None:
    if not node.startswith(CHANGE_PREFIX) or not node[len(CHANGE_PREFIX) :].isdigit():
        return None
    return int(node[len(CHANGE_PREFIX) :])


def decode_credentials(data: bytes) -> dict[str, ScramCredential]:
    """The SCRAM credentials in a user's config node, by mechanism (other keys skipped)."""
    config = decode_config(data)
    result: dict[str, ScramCredential] = {}
    for mechanism in MECHANISMS:
        text = config.get(mechanism)
        if text is None:
            continue
        try:
            result[mechanism] = parse_credential(text)
        except ScramError as exc:
            raise MalformedZnodeError(f"{mechanism} credential: {exc}") from None
    return result


def with_credential(data: bytes | None, mechanism: str, credential: ScramCredential | None) -> bytes | None:
    """The user's config node with ``mechanism`` set (or removed, for None): None when nothing is left."""
    config: dict[str, str] = decode_config(data) if data is not None else {}
    if credential is None:
        config.pop(mechanism, None)
    else:
        config[mechanism] = format_credential(credential)
    return encode_config(config) if config else None


def mechanisms_of(config: Mapping[str, str]) -> list[str]:
    return [m for m in MECHANISMS if m in config]


__all__ = [
    "CHANGE_EXPIRATION_MS",
    "CHANGE_PREFIX",
    "CONFIG_CHANGES",
    "CONFIG_USERS",
    "change_sequence",
    "decode_change",
    "decode_credentials",
    "desanitize",
    "encode_change",
    "entity_path",
    "mechanisms_of",
    "sanitize",
    "user_path",
    "with_credential",
]
