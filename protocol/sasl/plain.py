"""SASL PLAIN (RFC 4616): one message, ``[authzid] NUL authcid NUL password``, UTF-8.

Kafka's PlainSaslServer refuses an authorization id that differs from the user name, and an
empty user name or password; so does :func:`parse_plain`.
"""

from __future__ import annotations

from dataclasses import dataclass

MECHANISM = "PLAIN"
#: RFC 4616 caps each field at 255 octets; a longer message is refused before it is parsed.
MAX_MESSAGE = 3 * 255 + 2


class PlainError(ValueError):
    """A PLAIN message that is malformed; the text says how (never the password)."""


@dataclass(frozen=True, slots=True)
class PlainCredentials:
    username: str
    password: str

    def __repr__(self) -> str:  # never the password, in a log line or a traceback
        return f"PlainCredentials(username={self.username!r}, password=<hidden>)"


def encode_plain(username: str, password: str) -> bytes:
    return b"\0" + username.encode() + b"\0" + password.encode()


def parse_plain(message: bytes) -> PlainCredentials:
    if len(message) > MAX_MESSAGE:
        raise PlainError(f"PLAIN message of {len(message)} bytes is too long")
    parts = message.split(b"\0")
    if len(parts) != 3:
        raise PlainError("malformed PLAIN message: expected [authzid] NUL user NUL password")
    try:
        authzid, username, password = (part.decode("utf-8") for part in parts)
    except UnicodeDecodeError:
        raise PlainError("malformed PLAIN message: not UTF-8") from None
    if not username:
        raise PlainError("Authentication failed: username not specified")
    if not password:
        raise PlainError("Authentication failed: password not specified")
    if authzid and authzid != username:
        raise PlainError("Authentication failed: Client requested an authorization id that is different from username")
    return PlainCredentials(username, password)


__all__ = ["MECHANISM", "PlainCredentials", "PlainError", "encode_plain", "parse_plain"]
