"""ACL requests and responses (DescribeAcls, CreateAcls, DeleteAcls) in terms of Kafka's ACL model
(:mod:`tributary.protocol.acl`): what :class:`~tributary.client.admin.admin.Admin`'s ACL operations
send and read, kept apart from the retrying so that it reads (and tests) on its own."""

from __future__ import annotations

from collections.abc import Sequence

from tributary.protocol.acl import AclBinding, AclBindingFilter
from tributary.protocol.messages import (
    CreateAclsRequest,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)


def describe_request(binding_filter: AclBindingFilter) -> DescribeAclsRequest:
    pattern, entry = binding_filter.pattern, binding_filter.entry
    return DescribeAclsRequest(
        resource_type_filter=pattern.resource_type,
        resource_name_filter=pattern.name,
        pattern_type_filter=pattern.pattern_type,
        principal_filter=entry.principal,
        host_filter=entry.host,
        operation=entry.operation,
        permission_type=entry.permission_type,
    )


def described(response: DescribeAclsResponse) -> list[AclBinding]:
    return [
        AclBinding.from_wire(
            resource_type=resource.resource_type,
            name=resource.resource_name,
            pattern_type=resource.pattern_type,
            principal=acl.principal,
            host=acl.host,
            operation=acl.operation,
            permission=acl.permission_type,
        )
        for resource in response.resources
        for acl in resource.acls
    ]


def create_request(bindings: Sequence[AclBinding]) -> CreateAclsRequest:
    return CreateAclsRequest(
        creations=[
            CreateAclsRequest.AclCreation(
                resource_type=b.pattern.resource_type,
                resource_name=b.pattern.name,
                resource_pattern_type=b.pattern.pattern_type,
                principal=b.entry.principal,
                host=b.entry.host,
                operation=b.entry.operation,
                permission_type=b.entry.permission_type,
            )
            for b in bindings
        ]
    )


def delete_request(filters: Sequence[AclBindingFilter]) -> DeleteAclsRequest:
    return DeleteAclsRequest(
        filters=[
            DeleteAclsRequest.DeleteAclsFilter(
                resource_type_filter=f.pattern.resource_type,
                resource_name_filter=f.pattern.name,
                pattern_type_filter=f.pattern.pattern_type,
                principal_filter=f.entry.principal,
                host_filter=f.entry.host,
                operation=f.entry.operation,
                permission_type=f.entry.permission_type,
            )
            for f in filters
        ]
    )


def deleted(result: DeleteAclsResponse.DeleteAclsFilterResult) -> list[tuple[AclBinding, int, str | None]]:
    """One filter's matching ACLs: each binding with its own error code and message."""
    return [
        (
            AclBinding.from_wire(
                resource_type=a.resource_type,
                name=a.resource_name,
                pattern_type=a.pattern_type,
                principal=a.principal,
                host=a.host,
                operation=a.operation,
                permission=a.permission_type,
            ),
            a.error_code,
            a.error_message,
        )
        for a in result.matching_acls
    ]
