"""SCRAM (RFC 5802) with SHA-256 and SHA-512 (RFC 7677), as Kafka speaks it.

The exchange, client first::

    client-first   n,,n=<saslname>,r=<client nonce>[,<extensions>]
    server-first   r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final   c=biws,r=<nonce>,p=<base64 ClientProof>
    server-final   v=<base64 ServerSignature>        (or e=<error>)

with ``AuthMessage = client-first-bare + "," + server-first + "," + client-final-without-proof``
and the keys::

    SaltedPassword  = Hi(password, salt, i)              (PBKDF2-HMAC)
    ClientKey       = HMAC(SaltedPassword, "Client Key")
    StoredKey       = H(ClientKey)
    ClientSignature = HMAC(StoredKey, AuthMessage)
    ClientProof     = ClientKey XOR ClientSignature
    ServerKey       = HMAC(SaltedPassword, "Server Key")
    ServerSignature = HMAC(ServerKey, AuthMessage)

A server keeps only (salt, StoredKey, ServerKey, iterations), Kafka's ``ScramCredential``; it
checks a proof by recomputing ``H(ClientProof XOR ClientSignature)`` and comparing it with the
StoredKey. Kafka stores credentials as text: ``salt=<b64>,stored_key=<b64>,server_key=<b64>,
iterations=<n>`` (:func:`format_credential`). Channel binding is never used (``c=biws`` is the
base64 of the GS2 header ``n,,``). The primitives are the standard library's
(``hashlib.pbkdf2_hmac``, ``hmac``); comparisons are constant-time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass

#: Kafka's bounds on iterations (ScramMechanism.minIterations; AlterUserScramCredentials' maximum).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096
#: ``c=`` of the client-final message: base64 of the GS2 header "n,," (no channel binding).
_CHANNEL_BINDING = base64.b64encode(b"n,,").decode()


class ScramError(ValueError):
    """A SCRAM message that is malformed, or an exchange that failed; the text says which."""


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str
    #: Kafka's numeric id in DescribeUserScramCredentials / AlterUserScramCredentials.
    type_id: int
    hash_name: str

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: bytes, salt: bytes, iterations: int) -> bytes:
        return hashlib.pbkdf2_hmac(self.hash_name, password, salt, iterations)


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", 1, "sha256")
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", 2, "sha512")
MECHANISMS: dict[str, ScramMechanism] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
MECHANISMS_BY_TYPE: dict[int, ScramMechanism] = {m.type_id: m for m in MECHANISMS.values()}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What a server keeps of a password: never the password itself."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def credential_from_salted(mechanism: ScramMechanism, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    client_key = mechanism.hmac(salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        stored_key=mechanism.hash(client_key),
        server_key=mechanism.hmac(salted, b"Server Key"),
        iterations=iterations,
    )


def credential_from_password(
    mechanism: ScramMechanism, password: str, *, salt: bytes | None = None, iterations: int = DEFAULT_ITERATIONS
) -> ScramCredential:
    """A fresh credential (a random 32-byte salt unless one is given)."""
    salt = secrets.token_bytes(32) if salt is None else salt
    salted = mechanism.salted_password(password.encode(), salt, iterations)
    return credential_from_salted(mechanism, salted, salt, iterations)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def b64encode(data: bytes) -> bytes:
    return base64.b64encode(data)


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode(), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ScramError(f"{what} is not base64") from None


def format_credential(credential: ScramCredential) -> str:
    """Kafka's text form (ScramCredentialUtils.credentialToString)."""
    return (
        f"salt={_b64(credential.salt)},stored_key={_b64(credential.stored_key)},"
        f"server_key={_b64(credential.server_key)},iterations={credential.iterations}"
    )


def parse_credential(text: str) -> ScramCredential:
    """The inverse of :func:`format_credential`; ScramError when a part is missing or malformed."""
    fields = _attributes(text, "credential")
    missing = {"salt", "stored_key", "server_key", "iterations"} - fields.keys()
    if missing:
        raise ScramError(f"credential lacks {', '.join(sorted(missing))}")
    iterations = fields["iterations"]
    if not iterations.isdigit():
        raise ScramError(f"credential iterations is not a number: {iterations!r}")
    return ScramCredential(
        salt=_unb64(fields["salt"], "salt"),
        stored_key=_unb64(fields["stored_key"], "stored_key"),
        server_key=_unb64(fields["server_key"], "server_key"),
        iterations=int(iterations),
    )


# --- messages ------------------------------------------------------------------------------


def _attributes(text: str, what: str) -> dict[str, str]:
    """``a=1,b=2`` -> {"a": "1", "b": "2"}; values may hold "=" (base64) but not ","."""
    result: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ScramError(f"malformed {what}: {part!r} is not key=value")
        if key in result:
            raise ScramError(f"malformed {what}: {key!r} given twice")
        result[key] = value
    return result


def _text(message: bytes, what: str) -> str:
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError(f"{what} is not UTF-8") from None


def escape_name(name: str) -> str:
    """RFC 5802's saslname: "=" and "," are written =3D and =2C."""
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_name(saslname: str) -> str:
    # Any other "=" sequence is malformed (RFC 5802 section 5.1).
    rest = saslname.replace("=3D", "").replace("=2C", "")
    if "=" in rest:
        raise ScramError("malformed user name: '=' must be written =3D")
    return saslname.replace("=2C", ",").replace("=3D", "=")


@dataclass(frozen=True, slots=True)
class ClientFirst:
    username: str
    nonce: str
    authzid: str
    extensions: dict[str, str]
    #: client-first-message-bare: what the AuthMessage starts with.
    bare: str


def parse_client_first(message: bytes) -> ClientFirst:
    text = _text(message, "client-first message")
    # gs2-header: "n" (no channel binding; "y" says the client could have used it), then the
    # optional authzid "a=...", then the bare message.
    flag, sep, rest = text.partition(",")
    if not sep or flag not in ("n", "y"):
        raise ScramError("malformed client-first message: channel binding is not supported (expected 'n,')")
    authz, sep, bare = rest.partition(",")
    if not sep:
        raise ScramError("malformed client-first message: no authorization id field")
    authzid = ""
    if authz:
        if not authz.startswith("a="):
            raise ScramError("malformed client-first message: bad authorization id field")
        authzid = unescape_name(authz[2:])
    parts = bare.split(",")
    if parts[0].startswith("m="):
        raise ScramError("mandatory SCRAM extensions are not supported")
    if len(parts) < 2 or not parts[0].startswith("n=") or not parts[1].startswith("r="):
        raise ScramError("malformed client-first message: expected n=<user>,r=<nonce>")
    username = unescape_name(parts[0][2:])
    nonce = parts[1][2:]
    if not username or not nonce or not _printable(nonce):
        raise ScramError("malformed client-first message: empty user name or bad nonce")
    extensions = _attributes(",".join(parts[2:]), "extensions") if len(parts) > 2 else {}
    return ClientFirst(username, nonce, authzid, extensions, bare)


def _printable(nonce: str) -> bool:
    # RFC 5802: printable ASCII except ",".
    return all(0x21 <= ord(c) <= 0x7E and c != "," for c in nonce)


@dataclass(frozen=True, slots=True)
class ServerFirst:
    nonce: str
    salt: bytes
    iterations: int

    def text(self) -> str:
        return f"r={self.nonce},s={_b64(self.salt)},i={self.iterations}"


def parse_server_first(message: bytes) -> ServerFirst:
    text = _text(message, "server-first message")
    if text.startswith("e="):
        raise ScramError(f"the server refused: {text[2:]}")
    fields = _attributes(text, "server-first message")
    if "m" in fields:
        raise ScramError("the server asked for mandatory extensions")
    try:
        nonce, salt, iterations = fields["r"], fields["s"], fields["i"]
    except KeyError as exc:
        raise ScramError(f"malformed server-first message: no {exc.args[0]}=") from None
    if not iterations.isdigit():
        raise ScramError(f"malformed server-first message: iterations {iterations!r}")
    return ServerFirst(nonce, _unb64(salt, "salt"), int(iterations))


@dataclass(frozen=True, slots=True)
class ClientFinal:
    channel_binding: str
    nonce: str
    proof: bytes
    #: client-final-message-without-proof: the AuthMessage's last part.
    without_proof: str


def parse_client_final(message: bytes) -> ClientFinal:
    text = _text(message, "client-final message")
    without_proof, sep, proof = text.rpartition(",p=")
    if not sep:
        raise ScramError("malformed client-final message: no proof")
    fields = _attributes(without_proof, "client-final message")
    try:
        binding, nonce = fields["c"], fields["r"]
    except KeyError as exc:
        raise ScramError(f"malformed client-final message: no {exc.args[0]}=") from None
    return ClientFinal(binding, nonce, _unb64(proof, "proof"), without_proof)


def auth_message(client_first_bare: str, server_first: str, client_final_without_proof: str) -> bytes:
    return f"{client_first_bare},{server_first},{client_final_without_proof}".encode()


def _xor(left: bytes, right: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(left, right, strict=True))


def client_proof(mechanism: ScramMechanism, salted: bytes, message: bytes) -> bytes:
    client_key = mechanism.hmac(salted, b"Client Key")
    signature = mechanism.hmac(mechanism.hash(client_key), message)
    return _xor(client_key, signature)


def verify_proof(mechanism: ScramMechanism, credential: ScramCredential, message: bytes, proof: bytes) -> bool:
    """Whether ``proof`` shows knowledge of the password behind ``credential`` (constant time)."""
    if len(proof) != mechanism.digest_size:
        return False
    signature = mechanism.hmac(credential.stored_key, message)
    return hmac.compare_digest(mechanism.hash(_xor(proof, signature)), credential.stored_key)


def server_signature(mechanism: ScramMechanism, server_key: bytes, message: bytes) -> bytes:
    return mechanism.hmac(server_key, message)


def new_nonce() -> str:
    """32 random bytes as URL-safe base64: printable, never a comma."""
    return secrets.token_urlsafe(32)


class ScramClient:
    """The client side of one exchange: :meth:`first`, then :meth:`final` with the server's
    first message, then :meth:`verify` with its final one (raises ScramError on any failure,
    the server's signature included: a server that does not know the password is refused)."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str, *, nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._username = username
        self._password = password.encode()
        self._nonce = nonce if nonce is not None else new_nonce()
        self._bare = f"n={escape_name(username)},r={self._nonce}"
        self._expected_signature: bytes | None = None
        self.done = False

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first_message: bytes) -> bytes:
        server_first = parse_server_first(server_first_message)
        if not server_first.nonce.startswith(self._nonce) or len(server_first.nonce) == len(self._nonce):
            raise ScramError("the server's nonce does not extend the client's")
        if not MIN_ITERATIONS <= server_first.iterations <= 10 * MAX_ITERATIONS:
            # Refuse both a weak credential and a server that would make us burn CPU.
            raise ScramError(f"the server asked for {server_first.iterations} iterations")
        salted = self.mechanism.salted_password(self._password, server_first.salt, server_first.iterations)
        without_proof = f"c={_CHANNEL_BINDING},r={server_first.nonce}"
        message = auth_message(self._bare, server_first_message.decode(), without_proof)
        proof = client_proof(self.mechanism, salted, message)
        self._expected_signature = server_signature(self.mechanism, self.mechanism.hmac(salted, b"Server Key"), message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final_message: bytes) -> None:
        if self._expected_signature is None:
            raise ScramError("server-final message before the client-final one")
        text = _text(server_final_message, "server-final message")
        fields = _attributes(text, "server-final message")
        if "e" in fields:
            raise ScramError(f"the server refused: {fields['e']}")
        if "v" not in fields:
            raise ScramError("malformed server-final message: no v=")
        if not hmac.compare_digest(_unb64(fields["v"], "server signature"), self._expected_signature):
            raise ScramError("the server's signature is wrong: it does not know this user's credential")
        self.done = True


__all__ = [
    "DEFAULT_ITERATIONS",
    "MAX_ITERATIONS",
    "MECHANISMS",
    "MECHANISMS_BY_TYPE",
    "MIN_ITERATIONS",
    "SCRAM_SHA_256",
    "SCRAM_SHA_512",
    "ClientFinal",
    "ClientFirst",
    "ScramClient",
    "ScramCredential",
    "ScramError",
    "ScramMechanism",
    "ServerFirst",
    "auth_message",
    "b64encode",
    "client_proof",
    "credential_from_password",
    "credential_from_salted",
    "escape_name",
    "format_credential",
    "new_nonce",
    "parse_client_final",
    "parse_client_first",
    "parse_credential",
    "parse_server_first",
    "server_signature",
    "unescape_name",
    "verify_proof",
]
