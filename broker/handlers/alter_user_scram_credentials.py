"""AlterUserScramCredentials: set or delete users' SCRAM credentials, online.

The client sends the salt, the iteration count and the salted password (never the password);
the broker derives the StoredKey and ServerKey and writes Kafka's credential text to
``/config/users/<name>`` with a change notification, so every broker's cache follows within
moments. Each user's changes are checked first and applied only if all of them pass, with
Kafka's codes: UNACCEPTABLE_CREDENTIAL (empty name, iterations out of 4096-16384, no salted
password), UNSUPPORTED_SASL_MECHANISM, DUPLICATE_RESOURCE (a credential altered twice in one
request), RESOURCE_NOT_FOUND (deleting one that does not exist). The answer comes once this
broker's own cache holds the change, so a Describe that follows on it sees it. It needs Alter on
the Cluster (else every user gets CLUSTER_AUTHORIZATION_FAILED and nothing changes, as in Kafka).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

import trio

from tributary.broker.context import RequestContext
from tributary.broker.security.credentials import CredentialStoreError, NoSuchCredential
from tributary.protocol.acl import AclOperation
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse
from tributary.protocol.sasl.scram import (
    MAX_ITERATIONS,
    MECHANISMS_BY_TYPE,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_salted,
)

log = logging.getLogger(__name__)
Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
#: How long the answer waits for this broker's cache to show the change.
CACHE_WAIT = 5.0


@dataclass(frozen=True, slots=True)
class _Change:
    user: str
    mechanism_type: int
    credential: ScramCredential | None  # None: delete


def _check(request: AlterUserScramCredentialsRequest) -> tuple[list[_Change], dict[str, tuple[ErrorCode, str]]]:
    """The changes to make, and the first refusal of each refused user."""
    refused: dict[str, tuple[ErrorCode, str]] = {}
    keys = Counter(
        [(d.name, d.mechanism) for d in request.deletions] + [(u.name, u.mechanism) for u in request.upsertions]
    )

    def refuse(user: str, code: ErrorCode, message: str) -> None:
        refused.setdefault(user, (code, message))

    changes: list[_Change] = []
    for entry, upsert in [(d, None) for d in request.deletions] + [(u, u) for u in request.upsertions]:
        user = entry.name
        if not user:
            refuse(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
            continue
        mechanism = MECHANISMS_BY_TYPE.get(entry.mechanism)
        if mechanism is None:
            refuse(user, ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {entry.mechanism}")
            continue
        if keys[(user, entry.mechanism)] > 1:
            refuse(user, ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
            continue
        if upsert is None:
            changes.append(_Change(user, entry.mechanism, None))
            continue
        if upsert.iterations < MIN_ITERATIONS:
            refuse(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too few iterations (at least {MIN_ITERATIONS})")
        elif upsert.iterations > MAX_ITERATIONS:
            refuse(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too many iterations (at most {MAX_ITERATIONS})")
        elif not upsert.salt or len(upsert.salted_password) != mechanism.digest_size:
            refuse(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, f"A salt and a {mechanism.name} salted password are needed")
        else:
            credential = credential_from_salted(mechanism, upsert.salted_password, upsert.salt, upsert.iterations)
            changes.append(_Change(user, entry.mechanism, credential))
    return [c for c in changes if c.user not in refused], refused


async def handle(ctx: RequestContext, request: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    users = list(dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions]))
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return AlterUserScramCredentialsResponse(
            results=[
                Result(user=u, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None) for u in users
            ]
        )
    changes, refused = _check(request)
    cache = ctx.broker.credentials
    outcome: dict[str, tuple[ErrorCode, str | None]] = {user: why for user, why in refused.items()}
    for change in changes:
        if change.user in outcome:
            continue  # an earlier change of this user failed
        name = MECHANISMS_BY_TYPE[change.mechanism_type].name
        try:
            await cache.write(change.user, name, change.credential)
        except NoSuchCredential:
            outcome[change.user] = (
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
            continue
        except CredentialStoreError as exc:
            outcome[change.user] = (ErrorCode.UNKNOWN_SERVER_ERROR, str(exc))
            continue
        log.info(
            "%s %s credential of user %r (by %s)",
            "set" if change.credential is not None else "deleted",
            name,
            change.user,
            ctx.principal,
        )
        with trio.move_on_after(CACHE_WAIT):
            await cache.wait_until(
                lambda c=change, n=name: cache.lookup(c.user, n) == c.credential  # type: ignore[misc]
            )
    results = [
        Result(
            user=user,
            error_code=outcome.get(user, (ErrorCode.NONE, None))[0],
            error_message=outcome.get(user, (ErrorCode.NONE, None))[1],
        )
        for user in users
    ]
    return AlterUserScramCredentialsResponse(results=results)
