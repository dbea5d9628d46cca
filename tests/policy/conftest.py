"""Build the arguments the policies get, the way pulumi-policy's analyzer builds them.

The engine sends properties as a protobuf Struct; pulumi-policy turns it into a dict with
`json_format.MessageToDict` (every number a float), `deserialize_properties`, and wraps it in
`unknown_checking_proxy` (Mapping/Sequence proxies, not dicts and lists). These factories do the
same, so the tests exercise the real functions with what they will really see.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from google.protobuf import json_format, struct_pb2
from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import unknown_checking_proxy

STACK_URN = "urn:pulumi:test::vsphere-gpu-cluster::pulumi:pulumi:Stack::vsphere-gpu-cluster-test"


def wire_props(props: Mapping[str, Any]) -> Any:
    struct = struct_pb2.Struct()
    struct.update(dict(props))
    return unknown_checking_proxy(deserialize_properties(json_format.MessageToDict(struct)))


def urn_of(type_token: str, name: str) -> str:
    return f"urn:pulumi:test::vsphere-gpu-cluster::{type_token}::{name}"


def options(protect: bool = False) -> PolicyResourceOptions:
    return PolicyResourceOptions(protect, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)


@dataclass
class Collector:
    """A report_violation that keeps what it is told."""

    reported: list[tuple[str, str | None]] = field(default_factory=list)

    def __call__(self, message: str, urn: str | None = None) -> None:
        assert isinstance(message, str) and message
        self.reported.append((message, urn))

    @property
    def messages(self) -> list[str]:
        return [message for message, _ in self.reported]


@pytest.fixture
def collector() -> Collector:
    return Collector()


@pytest.fixture
def resource_args() -> Callable[..., ResourceValidationArgs]:
    def make(
        type_token: str, props: Mapping[str, Any], *, name: str = "res", config: Mapping[str, Any] | None = None
    ) -> ResourceValidationArgs:
        return ResourceValidationArgs(
            type_token, wire_props(props), urn_of(type_token, name), name, options(), None, config
        )

    return make


@pytest.fixture
def policy_resource() -> Callable[..., PolicyResource]:
    def make(
        type_token: str,
        props: Mapping[str, Any],
        *,
        name: str,
        protect: bool = False,
        dependencies: list[PolicyResource] | None = None,
        property_dependencies: dict[str, list[PolicyResource]] | None = None,
    ) -> PolicyResource:
        return PolicyResource(
            type_token,
            wire_props(props),
            urn_of(type_token, name),
            name,
            options(protect),
            None,
            None,
            list(dependencies or []),
            dict(property_dependencies or {}),
        )

    return make


@pytest.fixture
def stack_args() -> Callable[..., StackValidationArgs]:
    def make(resources: list[PolicyResource], config: Mapping[str, Any] | None = None) -> StackValidationArgs:
        return StackValidationArgs(resources, config)

    return make
