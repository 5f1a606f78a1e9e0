"""SCRAM users through the Kafka API: DescribeUserScramCredentials (50), AlterUserScramCredentials (51).

The client salts and hashes the password itself (PBKDF2 with a fresh 32-byte salt) and sends
only the salted password, as Kafka's Admin client does; the broker derives and stores the
StoredKey and ServerKey. Either API may go to any broker (ZooKeeper holds the credentials).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tributary.client.errors import KafkaError, error_for
from tributary.client.wire.cluster import Cluster
from tributary.protocol.messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from tributary.protocol.sasl.scram import DEFAULT_ITERATIONS, MECHANISMS, MECHANISMS_BY_TYPE


@dataclass(frozen=True, slots=True)
class ScramUser:
    name: str
    #: (mechanism name, iterations) of each credential the user has.
    credentials: tuple[tuple[str, int], ...]


async def describe_scram_users(cluster: Cluster, users: Sequence[str] | None = None) -> list[ScramUser]:
    """Every user with a credential (``users`` None), or the named ones (an unknown one raises
    ResourceNotFound's error)."""
    request = DescribeUserScramCredentialsRequest(
        users=None if not users else [DescribeUserScramCredentialsRequest.UserName(name=u) for u in users]
    )
    response: DescribeUserScramCredentialsResponse = await cluster.send_to_any(request)
    if response.error_code:
        raise error_for(response.error_code, detail=response.error_message, context="DescribeUserScramCredentials")
    found = []
    for result in response.results:
        if result.error_code:
            raise error_for(result.error_code, detail=result.error_message, context=f"user {result.user!r}")
        infos = tuple(
            (
                MECHANISMS_BY_TYPE[i.mechanism].name if i.mechanism in MECHANISMS_BY_TYPE else str(i.mechanism),
                i.iterations,
            )
            for i in result.credential_infos
        )
        found.append(ScramUser(result.user, infos))
    return found


@dataclass(frozen=True, slots=True)
class ScramUpsert:
    name: str
    mechanism: str
    password: str
    iterations: int = DEFAULT_ITERATIONS

    def __repr__(self) -> str:
        return f"ScramUpsert({self.name!r}, {self.mechanism}, iterations={self.iterations})"


async def alter_scram_users(
    cluster: Cluster, upserts: Iterable[ScramUpsert] = (), deletions: Iterable[tuple[str, str]] = ()
) -> dict[str, KafkaError | None]:
    """Set credentials and delete (user, mechanism) ones; per user, None or the error."""
    upsertions = []
    for upsert in upserts:
        if upsert.mechanism not in MECHANISMS:
            raise ValueError(f"unknown SCRAM mechanism {upsert.mechanism!r} (known: {', '.join(MECHANISMS)})")
        mechanism = MECHANISMS[upsert.mechanism]
        salt = secrets.token_bytes(32)
        upsertions.append(
            AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
                name=upsert.name,
                mechanism=mechanism.type_id,
                iterations=upsert.iterations,
                salt=salt,
                salted_password=mechanism.salted_password(upsert.password.encode(), salt, upsert.iterations),
            )
        )
    removals = []
    for name, mechanism_name in deletions:
        if mechanism_name not in MECHANISMS:
            raise ValueError(f"unknown SCRAM mechanism {mechanism_name!r} (known: {', '.join(MECHANISMS)})")
        removals.append(
            AlterUserScramCredentialsRequest.ScramCredentialDeletion(
                name=name, mechanism=MECHANISMS[mechanism_name].type_id
            )
        )
    response: AlterUserScramCredentialsResponse = await cluster.send_to_any(
        AlterUserScramCredentialsRequest(deletions=removals, upsertions=upsertions)
    )
    return {
        r.user: error_for(r.error_code, detail=r.error_message, context=f"user {r.user!r}") if r.error_code else None
        for r in response.results
    }


__all__ = ["ScramUpsert", "ScramUser", "alter_scram_users", "describe_scram_users"]
