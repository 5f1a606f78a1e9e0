"""The principal a request is made by, in Kafka's form ``User:alice``.

A connection starts as ``User:ANONYMOUS`` (PLAINTEXT listeners, SSL without a client
certificate) and takes the principal its authentication established: the SASL user name,
or the client certificate's subject mapped by ``ssl.principal.mapping.rules``. Every
request handled on the connection carries it (``RequestContext.principal``); the ACL
authorizer decides on it.
"""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` -> KafkaPrincipal("User", "alice"); the name may itself hold colons."""
        kind, sep, name = text.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"not a principal: {text!r} (expected TYPE:NAME, e.g. User:alice)")
        return cls(kind, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
