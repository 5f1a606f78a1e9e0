"""DescribeUserScramCredentials: which SCRAM mechanisms (and iterations) each user has.

Answered from the broker's credential cache, which follows ZooKeeper; it needs Describe on the
Cluster (else CLUSTER_AUTHORIZATION_FAILED for the whole request, as Kafka answers). No user named (null or
empty) describes every user with a credential; a user named twice gets DUPLICATE_RESOURCE, an
unknown one RESOURCE_NOT_FOUND, as Kafka answers them. Secrets (salt, keys) never leave.
"""

from __future__ import annotations

from collections import Counter

from tributary.broker.context import RequestContext
from tributary.protocol.acl import AclOperation
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse
from tributary.protocol.sasl.scram import MECHANISMS, ScramCredential

Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
Info = DescribeUserScramCredentialsResponse.CredentialInfo


def _described(user: str, credentials: dict[str, ScramCredential]) -> Result:
    infos = [
        Info(mechanism=MECHANISMS[name].type_id, iterations=credential.iterations)
        for name, credential in sorted(credentials.items(), key=lambda item: MECHANISMS[item[0]].type_id)
    ]
    return Result(user=user, error_code=ErrorCode.NONE, error_message=None, credential_infos=infos)


async def handle(
    ctx: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return DescribeUserScramCredentialsResponse(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None, results=[]
        )
    users = ctx.broker.credentials.users()
    if not request.users:
        results = [_described(user, creds) for user, creds in sorted(users.items())]
        return DescribeUserScramCredentialsResponse(error_code=ErrorCode.NONE, error_message=None, results=results)
    counts = Counter(u.name for u in request.users)
    results = []
    for name in dict.fromkeys(u.name for u in request.users):
        if counts[name] > 1:
            results.append(
                Result(
                    user=name,
                    error_code=ErrorCode.DUPLICATE_RESOURCE,
                    error_message="Cannot describe SCRAM credentials for the same user twice in a single request: "
                    + name,
                )
            )
        elif name not in users:
            results.append(
                Result(
                    user=name,
                    error_code=ErrorCode.RESOURCE_NOT_FOUND,
                    error_message=f"Attempt to describe a user credential that does not exist: {name}",
                )
            )
        else:
            results.append(_described(name, users[name]))
    return DescribeUserScramCredentialsResponse(error_code=ErrorCode.NONE, error_message=None, results=results)
