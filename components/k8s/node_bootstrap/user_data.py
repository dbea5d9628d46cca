"""The `#cloud-config` user-data of each node: files to write, and one command to start the unit.

What each node gets (all through cloud-init's VMware datasource, `guestinfo.userdata`):

- every node: the bootstrap script, its systemd unit, the node's settings for the script
  (`bootstrap.env`), the host settings (modules, sysctl, NetworkManager) and its kubeadm config;
  with a mirror, containerd's `hosts.toml` for the registry and the site CA (registry.py);
- the first control-plane node: no key either. `InitConfiguration` + `ClusterConfiguration` +
  `KubeletConfiguration`, the Calico `Installation`, and a control-plane `JoinConfiguration` it
  uses instead of init when the cluster already runs (a replaced VM); its keys reach it sealed to
  a key it makes itself (pki_handoff.py);
- every other control-plane node: no long-lived key. A short-lived control-plane join token and a
  certificate key in a `JoinConfiguration` with `controlPlane.certificateKey` (kubeadm downloads
  the shared PKI from the `kubeadm-certs` Secret), the same two in a 0600 settings file and the
  CA certificate, with which the script fetches the sealed EncryptionConfiguration
  (control_plane_join.py);
- workers: a `JoinConfiguration` only (bootstrap token + CA public-key pin), no key material;
- nodes with a PVRDMA NIC: the RDMA kernel modules to load at boot, and a udev rule that keeps
  the RDMA device's kernel name (`vmw_pvrdma0`), which the training jobs select it by.

cloud-init runs `write_files` and `runcmd` once per instance, and its VMware datasource re-reads
guestinfo on every boot (no `check_instance_id`), where `redact` has set the user-data to "---"
(`cloudinit/sources/DataSourceVMware.py`, `guestinfo_redact_keys`). So the systemd unit, not
runcmd, drives the bootstrap: the last file written is a drop-in that makes `multi-user.target`
want the unit on every boot, and runcmd only starts it on the first. What this cannot cover: a
first boot cut after the datasource read (and redacted) the user-data but before `write_files`
finished; the next boot reads "---" and the node never gets its files (docs/bootstrap.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import yaml

from components.k8s.node_bootstrap import host_files, paths
from components.k8s.node_bootstrap.api_server import encryption_configuration
from components.k8s.node_bootstrap.calico import calico_installation_documents
from components.k8s.node_bootstrap.control_plane_join import ControlPlaneJoin
from components.k8s.node_bootstrap.env_file import render_bootstrap_env
from components.k8s.node_bootstrap.firewall import render_firewall
from components.k8s.node_bootstrap.kubeadm import kubeadm_init_documents, kubeadm_join_document
from components.k8s.node_bootstrap.pki import BOOTSTRAP_TOKEN_PATTERN
from components.k8s.node_bootstrap.registry import containerd_registry_files
from components.k8s.node_bootstrap.spec import ClusterPki, ClusterSpec, find_node, node_role

# libyaml's emitter when PyYAML has it (same output, ~8x faster: this renders every node's
# user-data, the largest share of a plan's time at hundreds of workers; see BENCHMARKS.md).
_SafeDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _CloudConfigDumper(_SafeDumper):  # type: ignore[valid-type,misc]
    """Multi-line strings (PEM blocks, scripts) as literal blocks, for a readable document."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_CloudConfigDumper.add_representer(str, _represent_str)


def dump_yaml_documents(documents: Sequence[Mapping[str, Any]]) -> str:
    return yaml.dump_all(
        [dict(d) for d in documents],
        Dumper=_CloudConfigDumper,
        sort_keys=False,
        default_flow_style=False,
        explicit_start=True,
    )


def dump_yaml(value: Any) -> str:
    """One YAML document, block style, keys in insertion order, multi-line strings as literals."""
    return yaml.dump(value, Dumper=_CloudConfigDumper, sort_keys=False, default_flow_style=False)


def _file(path: str, content: str, permissions: str) -> dict[str, str]:
    if not content.endswith("\n"):
        content += "\n"
    return {"path": path, "owner": "root:root", "permissions": permissions, "content": content}


def _host_file(path: str, name: str, permissions: str = "0644") -> dict[str, str]:
    return _file(path, host_files.host_file(name), permissions)


def _api_server_files() -> list[dict[str, str]]:
    """The API server's admission and audit settings (api_server.py). Its encryption settings
    hold keys: the init node receives them sealed (pki_handoff.py), a joining control-plane node
    fetches them (control_plane_join.py)."""
    return [
        _host_file(paths.ADMISSION_CONFIG_PATH, host_files.ADMISSION_CONFIGURATION),
        _host_file(paths.AUDIT_POLICY_PATH, host_files.AUDIT_POLICY),
    ]


def render_encryption_configuration(spec: ClusterSpec, pki: ClusterPki) -> str:
    """The API server's EncryptionConfiguration: sealed to the init node (pki_handoff.py), a sealed
    Secret for the joining control-plane nodes (control_plane_join.py)."""
    return dump_yaml(encryption_configuration(spec.secrets_encryption_key_names, pki.secrets_encryption_keys))


def _control_plane_join_files(join: ControlPlaneJoin, ca_cert_hash: str) -> list[dict[str, str]]:
    """A joining control-plane node's way to its keys, none of them long-lived (control_plane_join.py)."""
    settings = (
        f"GPUCLUSTER_JOIN_TOKEN={join.token}\n"
        f"GPUCLUSTER_CERTIFICATE_KEY={join.certificate_key}\n"
        f"GPUCLUSTER_CA_CERT_HASH={ca_cert_hash}\n"
    )
    return [
        _file(paths.CLUSTER_CA_CERT_PATH, join.ca_cert_pem, "0644"),
        # 0600: the token and the certificate key, both short-lived.
        _file(paths.CONTROL_PLANE_JOIN_ENV_PATH, settings, "0600"),
    ]


def render_bootstrap_script() -> str:
    """The bootstrap script: one static file, the same on every node."""
    return host_files.host_file(host_files.BOOTSTRAP_SCRIPT)


def render_bootstrap_unit() -> str:
    """The unit that runs the script on every boot until it has succeeded, restarting it on failure."""
    return host_files.host_file(host_files.BOOTSTRAP_UNIT)


def render_user_data(
    spec: ClusterSpec,
    node_name: str,
    *,
    token: str,
    ca_cert_hash: str,
    control_plane_join: ControlPlaneJoin | None = None,
    pki_handoff_signer_pem: str | None = None,
) -> str:
    """The `#cloud-config` user-data of one node.

    `control_plane_join` is required for the control-plane nodes other than the first,
    `pki_handoff_signer_pem` (a public key) for the first. No node's
    user-data carries a long-lived key (the init node's arrive sealed: pki_handoff.py), but every
    one carries a token: callers must keep it secret. To render many nodes from the same
    credentials, use one `UserDataRenderer`.
    """
    return UserDataRenderer(
        spec,
        token=token,
        ca_cert_hash=ca_cert_hash,
        control_plane_join=control_plane_join,
        pki_handoff_signer_pem=pki_handoff_signer_pem,
    ).render(node_name)


_RUNCMD = [
    # Only the first boot's start: the drop-in written last by write_files makes multi-user.target
    # want the unit on every later boot. --no-block, because runcmd itself runs inside a unit
    # (cloud-final) that must not wait for ours.
    ["systemctl", "daemon-reload"],
    ["systemctl", "start", "--no-block", paths.BOOTSTRAP_UNIT_NAME],
]


class UserDataRenderer:
    """Renders the user-data of any number of nodes from one set of cluster credentials.

    Most of a node's document is the same for every node of its role: the bootstrap script, the
    systemd unit, the host settings and, on control-plane nodes, the API server's settings. Each `write_files`
    entry is YAML-emitted once per distinct content and reused; emitting them again for every
    node was most of the time spent rendering at hundreds of workers (BENCHMARKS.md, finding 13).
    The document is the same, byte for byte, as emitting it whole: an entry of a block sequence
    that is a mapping's value is written exactly as the same entry of a top-level sequence.

    It keeps credentials (the tokens in the emitted entries): keep it no longer than its documents.
    """

    def __init__(
        self,
        spec: ClusterSpec,
        *,
        token: str,
        ca_cert_hash: str,
        control_plane_join: ControlPlaneJoin | None = None,
        pki_handoff_signer_pem: str | None = None,
    ) -> None:
        if not BOOTSTRAP_TOKEN_PATTERN.match(token):
            raise ValueError("token is not a kubeadm bootstrap token ([a-z0-9]{6}.[a-z0-9]{16})")
        if not ca_cert_hash.startswith("sha256:"):
            raise ValueError("ca_cert_hash must be 'sha256:<hex>'")
        self._spec = spec
        self._token = token
        self._ca_cert_hash = ca_cert_hash
        self._control_plane_join = control_plane_join
        self._pki_handoff_signer_pem = pki_handoff_signer_pem
        self._emitted_files: dict[tuple[tuple[str, str], ...], str] = {}

    def render(self, node_name: str) -> str:
        """The `#cloud-config` user-data of one node of the cluster."""
        spec = self._spec
        node = find_node(spec, node_name)
        role = node_role(spec, node_name)
        files = [
            _host_file(paths.MODULES_LOAD_KUBERNETES_PATH, host_files.MODULES_LOAD_KUBERNETES),
            _host_file(paths.SYSCTL_PATH, host_files.SYSCTL_KUBERNETES),
            _host_file(paths.NETWORKMANAGER_CALICO_PATH, host_files.NETWORKMANAGER_CALICO),
        ]
        if spec.mirror_ca_pem:
            files.append(_file(paths.MIRROR_CA_PATH, spec.mirror_ca_pem, "0644"))
        files.extend(_file(path, content, "0644") for path, content in containerd_registry_files(spec))
        if node.rdma_ip is not None:
            files.append(_host_file(paths.MODULES_LOAD_RDMA_PATH, host_files.MODULES_LOAD_RDMA))
            files.append(_host_file(paths.RDMA_NAMING_RULES_PATH, host_files.RDMA_NAMING_RULES))
        token, ca_cert_hash = self._token, self._ca_cert_hash
        if role == "worker":
            kubeadm_docs = [
                kubeadm_join_document(spec, node, token=token, ca_cert_hash=ca_cert_hash, control_plane=False)
            ]
        elif role == "control-plane":
            cp_join = self._control_plane_join
            if cp_join is None:
                raise ValueError(
                    f"control-plane node {node_name!r} needs its control-plane join (token, certificate key)"
                )
            files.extend(_api_server_files())
            files.extend(_control_plane_join_files(cp_join, ca_cert_hash))
            kubeadm_docs = [
                kubeadm_join_document(
                    spec,
                    node,
                    token=cp_join.token,
                    ca_cert_hash=ca_cert_hash,
                    control_plane=True,
                    certificate_key=cp_join.certificate_key,
                )
            ]
        else:  # the init node: its keys arrive sealed to a key it makes (pki_handoff.py)
            if not self._pki_handoff_signer_pem:
                raise ValueError(
                    f"the first control-plane node {node_name!r} needs the public half of the stack's key "
                    "hand-off signing key (pki_handoff_signer_pem): it opens no sealed keys without it"
                )
            files.extend(_api_server_files())
            # Public: the node checks the sealed keys' signature with it before it opens them.
            files.append(_file(paths.PKI_HANDOFF_SIGNER_PATH, self._pki_handoff_signer_pem, "0644"))
            kubeadm_docs = kubeadm_init_documents(spec, token=token)
            # Used instead of init only when the cluster already runs (a replaced VM): the
            # same control-plane join as every other control-plane node. 0600: the token.
            join = kubeadm_join_document(spec, node, token=token, ca_cert_hash=ca_cert_hash, control_plane=True)
            files.append(_file(paths.KUBEADM_JOIN_CONFIG_PATH, dump_yaml_documents([join]), "0600"))
            files.append(
                _file(
                    paths.CALICO_INSTALLATION_PATH,
                    dump_yaml_documents(calico_installation_documents(spec)),
                    "0644",
                )
            )
        if spec.node_firewall is not None:
            files.append(_file(paths.FIREWALL_RULES_PATH, render_firewall(spec, spec.node_firewall), "0644"))
            files.append(_host_file(paths.FIREWALL_UNIT_PATH, host_files.FIREWALL_UNIT))
            files.append(_host_file(paths.KUBELET_WANTS_FIREWALL_PATH, host_files.KUBELET_WANTS_FIREWALL))
            if role != "worker":  # etcd runs here: its peer set follows the membership
                files.append(_host_file(paths.FIREWALL_SYNC_SCRIPT_PATH, host_files.FIREWALL_SYNC_SCRIPT, "0700"))
                files.append(_host_file(paths.FIREWALL_SYNC_UNIT_PATH, host_files.FIREWALL_SYNC_UNIT))
                files.append(_host_file(paths.FIREWALL_SYNC_TIMER_PATH, host_files.FIREWALL_SYNC_TIMER))
                files.append(_host_file(paths.KUBELET_WANTS_FIREWALL_SYNC_PATH, host_files.KUBELET_WANTS_FIREWALL_SYNC))
        # 0600: the kubeadm config holds the bootstrap token.
        files.append(_file(paths.KUBEADM_CONFIG_PATH, dump_yaml_documents(kubeadm_docs), "0600"))
        files.append(_file(paths.BOOTSTRAP_ENV_PATH, render_bootstrap_env(spec, role, node), "0644"))
        files.append(_file(paths.BOOTSTRAP_SCRIPT_PATH, render_bootstrap_script(), "0700"))
        files.append(_file(paths.BOOTSTRAP_UNIT_PATH, render_bootstrap_unit(), "0644"))
        # Last: its presence means every file before it was written (see the module docstring).
        files.append(_host_file(paths.BOOTSTRAP_WANTS_DROP_IN_PATH, host_files.BOOTSTRAP_WANTS_DROP_IN))

        head: dict[str, Any] = {
            "hostname": node.name,
            "preserve_hostname": False,
        }
        if spec.search_domain:
            head["fqdn"] = f"{node.name}.{spec.search_domain}"
        if spec.ssh_authorized_keys:
            head["ssh_authorized_keys"] = list(spec.ssh_authorized_keys)
        write_files = "".join(self._emitted_file(entry) for entry in files)
        return "#cloud-config\n" + dump_yaml(head) + "write_files:\n" + write_files + _runcmd_block()

    def _emitted_file(self, entry: dict[str, str]) -> str:
        key = tuple(entry.items())
        emitted = self._emitted_files.get(key)
        if emitted is None:
            emitted = self._emitted_files[key] = dump_yaml([entry])
        return emitted


@cache
def _runcmd_block() -> str:
    return dump_yaml({"runcmd": _RUNCMD})
