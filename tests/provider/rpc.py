"""The engine's side of each resource operation, over gRPC to the plugin process."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from pulumi.runtime.proto import provider_pb2

from tests.provider.plugin_process import marshal, unmarshal, urn


@dataclass
class Lifecycle:
    """One resource's calls, as the engine makes them for `pulumi up`, `refresh` and `destroy`."""

    stub: Any
    type_token: str
    name: str

    @property
    def urn(self) -> str:
        return urn(self.type_token, self.name)

    def check(
        self, news: Mapping[str, Any], olds: Mapping[str, Any] | None = None, secret: Collection[str] = ()
    ) -> Any:
        return self.stub.Check(
            provider_pb2.CheckRequest(urn=self.urn, olds=marshal(olds or {}), news=marshal(news, secret))
        )

    def checked(self, news: Mapping[str, Any], secret: Collection[str] = ()) -> dict[str, Any]:
        answer = self.check(news, secret=secret)
        assert list(answer.failures) == [], answer.failures
        return unmarshal(answer.inputs)[0]

    def create(self, props: Mapping[str, Any], secret: Collection[str] = ()) -> tuple[str, dict[str, Any], set[str]]:
        answer = self.stub.Create(provider_pb2.CreateRequest(urn=self.urn, properties=marshal(props, secret)))
        outs, secret_keys = unmarshal(answer.properties)
        return answer.id, outs, secret_keys

    def read(
        self, id_: str, props: Mapping[str, Any], inputs: Mapping[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        answer = self.stub.Read(
            provider_pb2.ReadRequest(id=id_, urn=self.urn, properties=marshal(props), inputs=marshal(inputs or {}))
        )
        return answer.id, unmarshal(answer.properties)[0]

    def diff(self, id_: str, olds: Mapping[str, Any], news: Mapping[str, Any]) -> Any:
        return self.stub.Diff(provider_pb2.DiffRequest(id=id_, urn=self.urn, olds=marshal(olds), news=marshal(news)))

    def delete(self, id_: str, props: Mapping[str, Any]) -> None:
        self.stub.Delete(provider_pb2.DeleteRequest(id=id_, urn=self.urn, properties=marshal(props)))


def no_change(diff: Any) -> bool:
    return diff.changes == provider_pb2.DiffResponse.DIFF_NONE and list(diff.replaces) == []
