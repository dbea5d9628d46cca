"""The join token the stack keeps valid (issue 13 defect 5), on the dev stack's real program.

What a real cluster does with what we render is modelled from the Kubernetes sources: kubeadm
init writes the token's Secret with `expiration = now + ttl` (kubeadm
`bootstraptoken/v1.encodeTokenSecretData`); a server-side apply conflicts on fields another
manager set to other values unless forced; kube-controller-manager's tokencleaner deletes an
expired token Secret; the bootstrap-token authenticator accepts `<id>.<secret>` only while the
Secret `bootstrap-token-<id>` exists, has type `bootstrap.kubernetes.io/token`, matching id and
secret, `usage-bootstrap-authentication: "true"` and an expiration in the future
(plugin/pkg/auth/authenticator/token/bootstrap/bootstrap.go); discovery needs the bootstrap
signer's JWS, made only for `usage-bootstrap-signing: "true"` tokens.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi.runtime import rpc

from components.k8s.bootstrap import ClusterBootstrapArgs
from components.k8s.join import rotation
from components.k8s.join.rotation import JoinTokenRotationArgs, JoinTokenRotationProvider
from components.k8s.join.token import NODE_BOOTSTRAP_GROUP, SECRET_TYPE
from components.k8s.node_bootstrap import KUBEADM_CONFIG_PATH, ClusterNode
from stacks.environment.loader import PROJECT, config_for_runtime, read_stack_file
from stacks.tools.plan.mock_runtime import ProgramRun, RecordedResource, contains_secret, run_program, run_project_main
from stacks.tools.plan.mock_values import MOCK_JOIN_TOKEN_ISSUED_AT
from tests.stack_fixtures import fixture_stack

ROOT = Path(__file__).resolve().parents[4]
SECRET_RESOURCE = "kubernetes:core/v1:Secret"
READY = "gpucluster:kubernetes:ApiServerReady"
ROTATION = "gpucluster:kubernetes:JoinTokenRotation"


@pytest.fixture(scope="module")
def dev_run() -> ProgramRun:
    config, secret_keys = config_for_runtime(read_stack_file(fixture_stack("dev")), "test-placeholder-secret")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PULUMI_ERROR_OUTPUT_STRING", "true")
        return run_program(run_project_main(ROOT), project=PROJECT, stack="dev", config=config, secret_keys=secret_keys)


def _kubeadm_documents(vm: RecordedResource) -> list[dict[str, Any]]:
    extra = vm.plain_inputs().get("extraConfig") or {}
    if "guestinfo.userdata" not in extra:
        return []
    user_data = yaml.safe_load(base64.b64decode(extra["guestinfo.userdata"]))
    files = [f for f in user_data.get("write_files", []) if f["path"] == KUBEADM_CONFIG_PATH]
    return [d for f in files for d in yaml.safe_load_all(f["content"]) if d]


def _documents_of_kind(run: ProgramRun, kind: str) -> list[dict[str, Any]]:
    vms = run.by_type("vsphere:index/virtualMachine:VirtualMachine")
    return [d for vm in vms for d in _kubeadm_documents(vm) if d.get("kind") == kind]


def _token_secrets(run: ProgramRun) -> list[RecordedResource]:
    return [r for r in run.by_type(SECRET_RESOURCE) if r.plain_inputs().get("type") == SECRET_TYPE]


def _decoded(secret: RecordedResource) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in secret.plain_inputs()["data"].items()}


# ------------------------------------------------------------------------------------------
# The plan: one Secret of the right shape, secret, behind the authorised API
# ------------------------------------------------------------------------------------------


def test_the_plan_holds_the_token_secret_kubeadm_expects(dev_run: ProgramRun) -> None:
    (secret,) = _token_secrets(dev_run)
    inputs = secret.plain_inputs()
    (join, *_) = _documents_of_kind(dev_run, "JoinConfiguration")
    token_id, token_secret = join["discovery"]["bootstrapToken"]["token"].split(".")
    assert inputs["metadata"]["name"] == f"bootstrap-token-{token_id}"
    assert inputs["metadata"]["namespace"] == "kube-system"
    assert inputs["type"] == "bootstrap.kubernetes.io/token"
    data = _decoded(secret)
    assert set(data) == {
        "token-id",
        "token-secret",
        "expiration",
        "usage-bootstrap-authentication",
        "usage-bootstrap-signing",
        "auth-extra-groups",
        "description",
    }
    assert (data["token-id"], data["token-secret"]) == (token_id, token_secret)
    assert data["usage-bootstrap-authentication"] == data["usage-bootstrap-signing"] == "true"
    assert data["auth-extra-groups"] == "system:bootstrappers:kubeadm:default-node-token"
    # kubeadm's own bootstrap RBAC binds this group; so does the init document's token.
    (init,) = _documents_of_kind(dev_run, "InitConfiguration")
    assert init["bootstrapTokens"][0]["groups"] == [NODE_BOOTSTRAP_GROUP]
    assert data["expiration"] == "2026-01-02T00:00:00Z"  # mocked issue time + 24 h (joinTokenTtlHours)
    # Forced apply: kubeadm init already wrote this Secret and owns `expiration`/`description`.
    assert inputs["metadata"]["annotations"] == {"pulumi.com/patchForce": "true"}


def test_the_token_is_secret_in_the_plan(dev_run: ProgramRun) -> None:
    (secret,) = _token_secrets(dev_run)
    assert rpc.is_rpc_secret(secret.inputs["data"])
    assert secret.redacted_inputs()["data"] == "[secret]"
    token_secret = _decoded(secret)["token-secret"]
    assert token_secret not in str([r.redacted_inputs() for r in dev_run.resources])


def test_the_secret_is_applied_only_through_the_authorised_api(dev_run: ProgramRun) -> None:
    (secret,) = _token_secrets(dev_run)
    (ready,) = dev_run.by_type(READY)
    providers = {p.urn: p for p in dev_run.by_type("pulumi:providers:kubernetes")}
    assert secret.provider is not None
    provider = providers[secret.provider.rsplit("::", 1)[0]]
    assert ready.urn in provider.dependencies
    # Its own provider adopts kubeadm's copy of the Secret (pulumi-kubernetes 4.29+ creates
    # client-side: without this a first `pulumi up` fails with AlreadyExists); the cluster's
    # provider, which every add-on uses, still refuses to adopt what it did not create.
    assert provider.inputs.get("upsertExistingObjects") == "true"  # provider config travels as strings
    others = [p for urn, p in providers.items() if urn != provider.urn]
    assert others and all(p.inputs.get("upsertExistingObjects") in (None, "false") for p in others)
    assert contains_secret(provider.inputs["kubeconfig"])
    # ...and "ready" means our admin certificate is authorised, not only that /readyz answers.
    assert ready.plain_inputs()["client_certificate_pem"].startswith("-----BEGIN CERTIFICATE-----")
    assert rpc.is_rpc_secret(ready.inputs["client_key_pem"])


# ------------------------------------------------------------------------------------------
# The cluster, modelled: a worker created on day 3 joins
# ------------------------------------------------------------------------------------------


class ApplyConflict(Exception):
    pass


@dataclass
class Cluster:
    """The kube-system token Secrets and, per data key, the field manager that owns it."""

    secrets: dict[str, dict[str, str]] = field(default_factory=dict)
    owners: dict[str, dict[str, str]] = field(default_factory=dict)

    def kubeadm_init(self, token: str, ttl: str, now: datetime) -> None:
        token_id, token_secret = token.split(".")
        hours = float(ttl.split("h")[0]) if ttl not in ("0", "0s") else 0.0
        data = {
            "token-id": token_id,
            "token-secret": token_secret,
            "usage-bootstrap-authentication": "true",
            "usage-bootstrap-signing": "true",
            "auth-extra-groups": NODE_BOOTSTRAP_GROUP,
            "description": "written by kubeadm",
        }
        if hours:
            data["expiration"] = rotation.format_rfc3339(now + timedelta(hours=hours))
        name = f"bootstrap-token-{token_id}"
        self.secrets[name] = data
        self.owners[name] = dict.fromkeys(data, "kubeadm")

    def server_side_apply(self, name: str, data: dict[str, str], *, force: bool, manager: str = "pulumi") -> None:
        live = self.secrets.setdefault(name, {})
        owners = self.owners.setdefault(name, {})
        conflicts = [k for k, v in data.items() if k in live and live[k] != v and owners.get(k) not in (None, manager)]
        if conflicts and not force:
            raise ApplyConflict(f"conflict with another field manager on {sorted(conflicts)}")
        live.update(data)
        owners.update(dict.fromkeys(data, manager))

    def token_cleaner(self, now: datetime) -> None:
        for name in [n for n, d in self.secrets.items() if _expired(d, now)]:
            del self.secrets[name]

    def authenticates(self, token: str, now: datetime) -> bool:
        token_id, token_secret = token.split(".")
        data = self.secrets.get(f"bootstrap-token-{token_id}")
        return (
            data is not None
            and data.get("token-id") == token_id
            and data.get("token-secret") == token_secret
            and data.get("usage-bootstrap-authentication") == "true"
            and data.get("usage-bootstrap-signing") == "true"  # discovery's JWS signature
            and not _expired(data, now)
        )


def _expired(data: dict[str, str], now: datetime) -> bool:
    return "expiration" in data and rotation.parse_rfc3339(data["expiration"]) < now


def test_a_worker_created_after_the_init_token_expired_can_still_join(dev_run: ProgramRun) -> None:
    """Defect 13.5: kubeadm registers the init token with its own lifetime; the stack's Secret
    keeps it for the stack's (and a worker of any run before the rotation joins with it)."""
    issued = rotation.parse_rfc3339(MOCK_JOIN_TOKEN_ISSUED_AT)
    init_time = issued + timedelta(hours=1)  # VMs are cloned and booted after the token exists
    (init,) = _documents_of_kind(dev_run, "InitConfiguration")
    (bootstrap_token,) = init["bootstrapTokens"]
    cluster = Cluster()
    cluster.kubeadm_init(bootstrap_token["token"], bootstrap_token["ttl"], init_time)

    # The same `pulumi up`, once ApiServerReady let the provider through.
    for secret in _token_secrets(dev_run):
        force = secret.plain_inputs()["metadata"].get("annotations", {}).get("pulumi.com/patchForce") == "true"
        cluster.server_side_apply(secret.plain_inputs()["metadata"]["name"], _decoded(secret), force=force)

    # The last moment a `pulumi up` keeps this token (joinTokenTtlHours 24, at most, since issue 53
    # item 9): just before half of it is gone. The run adds a worker whose user-data carries the same
    # token as the plan's workers; it joins half an hour later, and then the stack's Secret must
    # still hold the token, whatever kubeadm registered.
    ttl = 24
    last_up = issued + timedelta(hours=ttl / 2) - timedelta(minutes=1)
    assert not rotation.renewal_due(rotation.expiry(issued, ttl), ttl, last_up)  # dev: joinTokenTtlHours default
    joins = last_up + timedelta(minutes=30)
    cluster.token_cleaner(joins)
    worker_token = _documents_of_kind(dev_run, "JoinConfiguration")[-1]["discovery"]["bootstrapToken"]["token"]
    assert cluster.authenticates(worker_token, joins), "the new worker's join token is unknown or expired in the cluster"
    # A run past half-life issues a new token for new workers: this one is not used again.
    assert rotation.renewal_due(rotation.expiry(issued, ttl), ttl, issued + timedelta(hours=ttl / 2))


def test_without_the_forced_apply_kubeadms_copy_would_refuse_the_takeover(dev_run: ProgramRun) -> None:
    (init,) = _documents_of_kind(dev_run, "InitConfiguration")
    (bootstrap_token,) = init["bootstrapTokens"]
    cluster = Cluster()
    cluster.kubeadm_init(bootstrap_token["token"], bootstrap_token["ttl"], datetime(2026, 1, 1, 1, tzinfo=UTC))
    (secret,) = _token_secrets(dev_run)
    with pytest.raises(ApplyConflict, match="expiration"):
        cluster.server_side_apply(secret.plain_inputs()["metadata"]["name"], _decoded(secret), force=False)


# ------------------------------------------------------------------------------------------
# JoinTokenRotation: the clock, honestly
# ------------------------------------------------------------------------------------------

T0 = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[datetime]:
    now = [T0]
    monkeypatch.setattr(rotation, "utc_now", lambda: now[0])
    return now


def test_create_records_issue_and_expiry(clock: list[datetime]) -> None:
    result = JoinTokenRotationProvider().create({"ttl_hours": 168})
    assert result.outs == {
        "ttl_hours": 168.0,
        "issued_at": "2026-03-01T12:00:00Z",
        "expires_at": "2026-03-08T12:00:00Z",
    }
    assert result.id == "join-token-2026-03-01T12:00:00Z"


@pytest.mark.parametrize(
    ("hours_later", "news", "replaces"),
    [
        (0, {"ttl_hours": 168}, []),
        (72, {"ttl_hours": 168}, []),  # day 3: the token still has 4 days
        (84, {"ttl_hours": 168}, ["expires_at"]),  # half gone: a new token for new nodes
        (240, {"ttl_hours": 168}, ["expires_at"]),  # expired (and deleted by tokencleaner)
        (1, {"ttl_hours": 24}, ["ttl_hours"]),  # a new lifetime: a new token
    ],
)
def test_diff_renews_once_half_of_the_lifetime_passed(
    clock: list[datetime], hours_later: int, news: dict[str, Any], replaces: list[str]
) -> None:
    provider = JoinTokenRotationProvider()
    olds = provider.create({"ttl_hours": 168}).outs
    assert olds is not None
    clock[0] = T0 + timedelta(hours=hours_later)
    diff = provider.diff("id", olds, news)
    assert diff.replaces == replaces
    assert diff.changes is bool(replaces)


def test_read_update_delete_keep_what_was_issued(clock: list[datetime]) -> None:
    provider = JoinTokenRotationProvider()
    olds = provider.create({"ttl_hours": 48}).outs
    assert olds is not None
    clock[0] = T0 + timedelta(days=30)
    assert provider.read("id", olds).outs == olds
    assert provider.update("id", olds, {"ttl_hours": 48}).outs == olds
    assert provider.delete("id", olds) is None


@pytest.mark.parametrize("hours", [0, 1, 87601])
def test_ttl_bounds_are_enforced(hours: int) -> None:
    with pytest.raises(ValueError, match="join_token_ttl_hours must be between 2 and 87600"):
        JoinTokenRotationArgs(ttl_hours=hours)
    with pytest.raises(ValueError, match="join_token_ttl_hours"):
        ClusterBootstrapArgs(
            cluster_name="gpu",
            kubernetes_version="1.34.2",
            pod_cidr="10.244.0.0/16",
            service_cidr="10.96.0.0/12",
            control_plane_endpoint="10.0.0.10",
            control_plane_nodes=[ClusterNode(name="cp-1", management_ip="10.0.0.11")],
            join_token_ttl_hours=hours,
        )
