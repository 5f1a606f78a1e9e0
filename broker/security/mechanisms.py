"""The server side of each SASL mechanism, sans-IO: a token in, a token out, or a refusal.

SCRAM (RFC 5802/7677) checks a proof against the credential kept in ZooKeeper and never sees a
password. PLAIN receives the password itself and checks it against the same SCRAM credential
(its salt and iterations give the StoredKey the password must produce), so one credential per
user serves both mechanisms and no password is stored anywhere (docs/security.md says why).

An unknown user is not told apart from a wrong password: SCRAM answers it with a made-up salt
derived from the name (RFC 5802, section 9) and fails at the proof, as PLAIN fails at the check.
The message a client sees is Kafka's generic one; the reason, for the log, says what failed.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from typing import Protocol

from tributary.protocol.sasl import scram
from tributary.protocol.sasl.plain import PlainError, parse_plain
from tributary.protocol.sasl.scram import ScramCredential, ScramError, ScramMechanism

#: credential(user, mechanism name) -> the user's SCRAM credential, or None.
CredentialLookup = Callable[[str, str], ScramCredential | None]

#: Per process: made-up salts for unknown users are stable within a broker's life.
_FAKE_SALT_KEY = secrets.token_bytes(32)


class AuthenticationFailed(Exception):
    """The exchange failed. ``client_message`` goes to the client (never a secret, never whether
    the user exists); ``reason`` goes to the log; ``kind`` labels the metric."""

    def __init__(self, client_message: str, reason: str, kind: str = "bad_credentials") -> None:
        super().__init__(reason)
        self.client_message = client_message
        self.reason = reason
        self.kind = kind


def invalid_credentials(mechanism: str) -> str:
    """Kafka's answer to a SaslException: the same for every failure of the credentials."""
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


class ServerMechanism(Protocol):
    name: str

    @property
    def complete(self) -> bool: ...

    @property
    def username(self) -> str: ...

    def step(self, token: bytes) -> bytes:
        """The answer to the client's token; raises AuthenticationFailed."""
        ...


class ScramServer:
    """One SCRAM exchange: client-first -> server-first, client-final -> server-final."""

    def __init__(
        self, mechanism: ScramMechanism, lookup: CredentialLookup, *, server_nonce: Callable[[], str] = scram.new_nonce
    ) -> None:
        self.name = mechanism.name
        self._server_nonce = server_nonce
        self._mechanism = mechanism
        self._lookup = lookup
        self._client_first: scram.ClientFirst | None = None
        self._server_first: scram.ServerFirst | None = None
        self._credential: ScramCredential | None = None
        self._known = False
        self._username = ""
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def username(self) -> str:
        return self._username

    def _fail(self, reason: str, kind: str = "bad_credentials") -> AuthenticationFailed:
        return AuthenticationFailed(invalid_credentials(self.name), reason, kind)

    def step(self, token: bytes) -> bytes:
        if self._complete:
            raise AuthenticationFailed("SCRAM exchange already complete", "a token after the exchange", "illegal_state")
        if self._client_first is None:
            return self._first(token)
        return self._final(token)

    def _first(self, token: bytes) -> bytes:
        try:
            first = scram.parse_client_first(token)
        except ScramError as exc:
            raise self._fail(f"malformed client-first message: {exc}", "malformed") from None
        if first.authzid and first.authzid != first.username:
            # Kafka sends this one as it is (SaslAuthenticationException).
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username",
                f"user {first.username!r} asked for authorization id {first.authzid!r}",
            )
        if "tokenauth" in first.extensions:
            raise self._fail(f"user {first.username!r}: delegation tokens are not supported", "malformed")
        credential = self._lookup(first.username, self.name)
        self._known = credential is not None
        if credential is None or credential.iterations < scram.MIN_ITERATIONS:
            # Answer as for a real user: salt and iterations must not reveal who exists.
            salt = hmac.new(_FAKE_SALT_KEY, first.username.encode(), "sha256").digest()
            credential = ScramCredential(salt, b"", b"", scram.DEFAULT_ITERATIONS)
        self._client_first = first
        self._credential = credential
        self._username = first.username
        nonce = first.nonce + self._server_nonce()
        self._server_first = scram.ServerFirst(nonce, credential.salt, credential.iterations)
        return self._server_first.text().encode()

    def _final(self, token: bytes) -> bytes:
        assert self._client_first is not None and self._server_first is not None and self._credential is not None
        user = self._client_first.username
        try:
            final = scram.parse_client_final(token)
        except ScramError as exc:
            raise self._fail(f"user {user!r}: malformed client-final message: {exc}", "malformed") from None
        agreed = self._server_first.nonce
        # librdkafka before 2.6.1 (Debian's kcat links 2.0.2) sends the client nonce once more in
        # front of the agreed one (confluentinc/librdkafka#4895); Kafka 3.8.1 accepts that form
        # too. Exactly those two forms pass: the proof covers the message either way.
        if final.nonce not in (agreed, self._client_first.nonce + agreed):
            raise self._fail(f"user {user!r}: the client-final nonce is not the one agreed (tampered)", "malformed")
        if final.channel_binding not in ("biws", "eSws"):  # base64 of "n,," and "y,,"
            raise self._fail(f"user {user!r}: unexpected channel binding {final.channel_binding!r}", "malformed")
        message = scram.auth_message(self._client_first.bare, self._server_first.text(), final.without_proof)
        if not self._known:
            raise self._fail(f"unknown user {user!r}")
        if not scram.verify_proof(self._mechanism, self._credential, message, final.proof):
            raise self._fail(f"user {user!r}: wrong password (the proof does not match)")
        signature = scram.server_signature(self._mechanism, self._credential.server_key, message)
        self._complete = True
        self._credential = None
        return b"v=" + scram.b64encode(signature)


#: The SCRAM mechanisms PLAIN checks a password against, strongest first.
_PLAIN_CHECKS = (scram.SCRAM_SHA_512, scram.SCRAM_SHA_256)


class PlainServer:
    """PLAIN: one message with the password, checked against the user's SCRAM credential."""

    name = "PLAIN"

    def __init__(self, lookup: CredentialLookup) -> None:
        self._lookup = lookup
        self._username = ""
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def username(self) -> str:
        return self._username

    def step(self, token: bytes) -> bytes:
        if self._complete:
            raise AuthenticationFailed("PLAIN exchange already complete", "a token after the exchange", "illegal_state")
        try:
            credentials = parse_plain(token)
        except PlainError as exc:
            message = str(exc) if str(exc).startswith("Authentication failed") else invalid_credentials(self.name)
            raise AuthenticationFailed(message, f"malformed PLAIN message: {exc}", "malformed") from None
        user = credentials.username
        for mechanism in _PLAIN_CHECKS:
            credential = self._lookup(user, mechanism.name)
            if credential is None:
                continue
            salted = mechanism.salted_password(credentials.password.encode(), credential.salt, credential.iterations)
            expected = scram.credential_from_salted(mechanism, salted, credential.salt, credential.iterations)
            if hmac.compare_digest(expected.stored_key, credential.stored_key):
                self._username = user
                self._complete = True
                return b""
            raise AuthenticationFailed(invalid_credentials(self.name), f"user {user!r}: wrong password")
        raise AuthenticationFailed(invalid_credentials(self.name), f"unknown user {user!r}")


def server_mechanism(name: str, lookup: CredentialLookup) -> ServerMechanism:
    """The server side of ``name`` (a mechanism the listener enabled)."""
    if name == PlainServer.name:
        return PlainServer(lookup)
    return ScramServer(scram.MECHANISMS[name], lookup)


__all__ = [
    "AuthenticationFailed",
    "CredentialLookup",
    "PlainServer",
    "ScramServer",
    "ServerMechanism",
    "invalid_credentials",
    "server_mechanism",
]
