"""A Kubernetes API double for the drain: nodes, pods, ReplicaSets and PodDisruptionBudgets.

It answers the calls `drain_node` makes the way kube-apiserver does, and is no kinder:
- an eviction is checked against every PodDisruptionBudget whose selector matches the pod: more
  than one is a 500, a budget with no disruption left is a 429 with the API server's own message
  ("Cannot evict pod as it would violate the pod's disruption budget.", pkg/registry/core/pod/
  storage/eviction.go), otherwise the budget's allowance drops by one and the pod starts
  terminating (it is gone `grace_ticks` later);
- the disruption controller recomputes each budget's allowance only when time passes (a tick):
  healthy pods (Running, Ready, not terminating) minus `minAvailable`;
- a ReplicaSet replaces a deleted pod on another schedulable node; the replacement is Ready only
  `ready_ticks` later, so a budget at its floor lets the next eviction through only then.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from components.k8s.api.client import Response

PDB_REFUSAL = "Cannot evict pod as it would violate the pod's disruption budget."


def _merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """JSON merge patch (RFC 7386), as the API server applies `application/merge-patch+json`:
    objects merge key by key, `null` deletes, anything else replaces."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge_patch(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


@dataclass
class Pdb:
    namespace: str
    name: str
    selector: dict[str, str]
    min_available: int
    allowed: int = 0


@dataclass
class KubeDouble:
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    configmaps: dict[str, dict[str, Any]] = field(default_factory=dict)
    """`namespace/name` to ConfigMap."""
    apps: dict[str, dict[str, Any]] = field(default_factory=dict)
    """`daemonsets/namespace/name` or `deployments/namespace/name` to the apps/v1 object."""
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    pdbs: list[Pdb] = field(default_factory=list)
    grace_ticks: int = 1
    ready_ticks: int = 2
    now: int = 0
    calls: list[tuple[str, str]] = field(default_factory=list)
    refusals: int = 0
    """Evictions refused by a budget (429)."""
    _ids: Any = field(default_factory=lambda: itertools.count(1))

    # --- building the world -------------------------------------------------------------------
    def add_node(
        self, name: str, *, ready: bool = True, boot_id: str = "boot-1", labels: dict[str, str] | None = None
    ) -> None:
        """A registered node; the kubelet reports `ready` and its `boot_id` (`status.nodeInfo.bootID`)."""
        self.nodes[name] = {
            "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": {},
            "status": {
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                "nodeInfo": {"bootID": boot_id},
            },
        }

    def set_ready(self, name: str, ready: bool) -> None:
        self.nodes[name]["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]

    def add_pod(
        self, namespace: str, name: str, node: str, *, labels: dict[str, str] | None = None, owner: str | None = None
    ) -> None:
        owners = [{"kind": owner.split("/")[0], "name": owner.split("/")[1]}] if owner else []
        self.pods[f"{namespace}/{name}"] = {
            "metadata": {"namespace": namespace, "name": name, "labels": labels or {}, "ownerReferences": owners},
            "spec": {"nodeName": node},
            "status": {"phase": "Running", "ready_at": self.now},
        }

    def add_pdb(self, namespace: str, name: str, selector: dict[str, str], min_available: int) -> None:
        self.pdbs.append(Pdb(namespace, name, selector, min_available))
        self._recompute()

    # --- time -----------------------------------------------------------------------------------
    def tick(self, _seconds: float = 0) -> None:
        self.now += 1
        for key, pod in list(self.pods.items()):
            gone_at = pod["metadata"].get("gone_at")
            if gone_at is not None and self.now >= gone_at:
                del self.pods[key]
                self._replace(pod)
        self._recompute()

    def _replace(self, pod: dict[str, Any]) -> None:
        owners = pod["metadata"]["ownerReferences"]
        if not owners or owners[0]["kind"] != "ReplicaSet":
            return
        target = next((n for n, node in sorted(self.nodes.items()) if not node["spec"].get("unschedulable")), None)
        if target is None:
            return  # nowhere to go: stays Pending, unscheduled (not modelled further)
        meta = pod["metadata"]
        name = f"{owners[0]['name']}-r{next(self._ids)}"
        self.add_pod(meta["namespace"], name, target, labels=meta["labels"], owner=f"ReplicaSet/{owners[0]['name']}")
        self.pods[f"{meta['namespace']}/{name}"]["status"]["ready_at"] = self.now + self.ready_ticks

    def _healthy(self, pod: dict[str, Any]) -> bool:
        return "deletionTimestamp" not in pod["metadata"] and pod["status"]["ready_at"] <= self.now

    def _matches(self, pdb: Pdb, pod: dict[str, Any]) -> bool:
        labels = pod["metadata"]["labels"]
        return pod["metadata"]["namespace"] == pdb.namespace and all(
            labels.get(k) == v for k, v in pdb.selector.items()
        )

    def _recompute(self) -> None:
        for pdb in self.pdbs:
            healthy = sum(1 for pod in self.pods.values() if self._matches(pdb, pod) and self._healthy(pod))
            pdb.allowed = max(0, healthy - pdb.min_available)

    # --- the API ----------------------------------------------------------------------------------
    def request(self, method: str, path: str, body: dict[str, Any] | None = None, *, patch: bool = False) -> Response:
        self.calls.append((method, path))
        url = urlparse(path)
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        if parts[:3] == ["api", "v1", "nodes"] and len(parts) == 4:
            return self._node(method, parts[3], body, patch)
        if parts == ["api", "v1", "nodes"] and method == "GET":
            return Response(200, {"kind": "NodeList", "items": self._nodes_labelled(url.query)})
        if parts[:3] == ["apis", "apps", "v1"] and len(parts) == 7 and parts[5] in ("daemonsets", "deployments"):
            return self._object(self.apps, parts[5], f"{parts[5]}/{parts[4]}/{parts[6]}", method, body, patch)
        if parts[:3] == ["api", "v1", "namespaces"] and len(parts) in (5, 6) and parts[4] == "configmaps":
            return self._configmap(method, parts[3], parts[5] if len(parts) == 6 else None, body, patch)
        if parts == ["api", "v1", "pods"] and method == "GET":
            selector = parse_qs(url.query)["fieldSelector"][0]
            node = selector.split("=", 1)[1]
            items = [self._public(p) for p in self.pods.values() if p["spec"]["nodeName"] == node]
            return Response(200, {"kind": "PodList", "items": items})
        if (
            len(parts) == 7
            and parts[:3] == ["api", "v1", "namespaces"]
            and parts[4] == "pods"
            and parts[6] == "eviction"
        ):
            assert method == "POST" and body is not None and body["kind"] == "Eviction", (method, body)
            return self._evict(f"{parts[3]}/{parts[5]}")
        return Response(
            404, {"kind": "Status", "message": f"the server could not find the requested resource ({path})"}
        )

    def _nodes_labelled(self, query: str) -> list[dict[str, Any]]:
        """`labelSelector=key` (existence) or `key=value`, as a list call filters nodes."""
        selector = (parse_qs(query).get("labelSelector") or [""])[0]
        key, _, value = selector.partition("=")
        found = []
        for node in self.nodes.values():
            labels = node["metadata"].get("labels") or {}
            if not key or (key in labels and (not value or labels[key] == value)):
                found.append(copy.deepcopy(node))
        return found

    def _public(self, pod: dict[str, Any]) -> dict[str, Any]:
        public = copy.deepcopy(pod)
        public["status"] = {"phase": pod["status"]["phase"]}
        public["metadata"].pop("gone_at", None)
        return public

    def _node(self, method: str, name: str, body: dict[str, Any] | None, patch: bool) -> Response:
        return self._object(self.nodes, "nodes", name, method, body, patch)

    @staticmethod
    def _object(
        store: dict[str, dict[str, Any]], kind: str, key: str, method: str, body: dict[str, Any] | None, patch: bool
    ) -> Response:
        """GET, merge-PATCH or DELETE one stored object, with the API server's 404 and 405."""
        found = store.get(key)
        if found is None:
            name = key.rsplit("/", 1)[-1]
            return Response(404, {"kind": "Status", "message": f'{kind} "{name}" not found', "code": 404})
        if method == "GET":
            return Response(200, copy.deepcopy(found))
        if method == "PATCH":
            assert patch and body is not None
            stored = (found.get("metadata") or {}).get("resourceVersion")
            wanted = (body.get("metadata") or {}).get("resourceVersion")
            if wanted is not None and wanted != stored:
                # A resourceVersion in a patch is a precondition (optimistic concurrency).
                name = key.rsplit("/", 1)[-1]
                return Response(
                    409,
                    {
                        "kind": "Status",
                        "code": 409,
                        "reason": "Conflict",
                        "message": f'Operation cannot be fulfilled on {kind} "{name}": the object has been modified; '
                        "please apply your changes to the latest version and try again",
                    },
                )
            _merge_patch(found, body)
            if stored is not None:  # every write moves it on
                found["metadata"]["resourceVersion"] = str(int(stored) + 1)
            return Response(200, copy.deepcopy(found))
        if method == "DELETE":
            del store[key]
            return Response(200, {"kind": "Status", "status": "Success"})
        return Response(405, {"kind": "Status", "message": "method not allowed"})

    def _configmap(
        self, method: str, namespace: str, name: str | None, body: dict[str, Any] | None, patch: bool
    ) -> Response:
        if name is None:  # the collection: create
            assert method == "POST" and body is not None
            key = f"{namespace}/{body['metadata']['name']}"
            if key in self.configmaps:
                return Response(409, {"kind": "Status", "message": f'configmaps "{key}" already exists', "code": 409})
            self.configmaps[key] = copy.deepcopy(body)
            return Response(201, copy.deepcopy(body))
        return self._object(self.configmaps, "configmaps", f"{namespace}/{name}", method, body, patch)

    def _evict(self, key: str) -> Response:
        pod = self.pods.get(key)
        if pod is None:
            return Response(404, {"kind": "Status", "message": f'pods "{key.split("/")[1]}" not found', "code": 404})
        if "deletionTimestamp" in pod["metadata"]:
            return Response(200, {"kind": "Status", "status": "Success"})  # already terminating
        budgets = [pdb for pdb in self.pdbs if self._matches(pdb, pod)]
        if len(budgets) > 1:
            return Response(
                500,
                {
                    "kind": "Status",
                    "code": 500,
                    "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                },
            )
        if budgets and self._healthy(pod):
            if budgets[0].allowed <= 0:
                self.refusals += 1
                return Response(
                    429, {"kind": "Status", "code": 429, "reason": "TooManyRequests", "message": PDB_REFUSAL}
                )
            budgets[0].allowed -= 1
        pod["metadata"]["deletionTimestamp"] = f"t{self.now}"
        pod["metadata"]["gone_at"] = self.now + self.grace_ticks
        return Response(201, {"kind": "Status", "status": "Success", "code": 201})


@contextlib.contextmanager
def served(kube: KubeDouble) -> Iterator[str]:
    """The double over HTTP on loopback, for the length of the block; yields a kubeconfig for it."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            patch = self.headers.get("Content-Type") == "application/merge-patch+json"
            response = kube.request(self.command, self.path, body, patch=patch)
            data = json.dumps(response.body).encode()
            self.send_response(response.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_DELETE = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "c",
            "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
            "clusters": [{"name": "k", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
            "users": [{"name": "u", "user": {"token": "t0ken"}}],
        }
    )
    try:
        yield kubeconfig
    finally:
        server.shutdown()
        server.server_close()
