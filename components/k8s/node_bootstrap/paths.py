"""Where things live on a node. The bootstrap script (files/gpucluster-bootstrap.sh) spells the
same paths; a test reads them back from the script so the two cannot drift."""

CRI_SOCKET = "unix:///run/containerd/containerd.sock"
KUBEADM_CONFIG_PATH = "/etc/kubernetes/kubeadm-config.yaml"
"""kubeadm's configuration (holds the join token: 0600, removed once the node is bootstrapped)."""
KUBEADM_JOIN_CONFIG_PATH = "/etc/kubernetes/kubeadm-join.yaml"
"""First control-plane node only: the control-plane `JoinConfiguration` it uses instead of
`kubeadm init` when it finds the cluster already running (a replaced VM). 0600 (the join token),
removed with the kubeadm config."""
CALICO_INSTALLATION_PATH = "/etc/kubernetes/calico-installation.yaml"
PKI_DIR = "/etc/kubernetes/pki"
PKI_STAGING_DIR = "/var/lib/gpucluster/pki"
"""Where user-data writes the shared PKI; the script copies it into `PKI_DIR` before kubeadm
runs (a `kubeadm reset` of a failed join empties `PKI_DIR`, and must not take the CA with it)."""

BOOTSTRAP_ENV_PATH = "/etc/gpucluster/bootstrap.env"
"""The node's settings for the script, read by the unit's `EnvironmentFile=`."""
BOOTSTRAP_SCRIPT_PATH = "/usr/local/sbin/gpucluster-bootstrap.sh"
BOOTSTRAP_STATE_DIR = "/var/lib/gpucluster"
BOOTSTRAP_DONE_MARKER = f"{BOOTSTRAP_STATE_DIR}/bootstrap.done"
BOOTSTRAP_UNIT_NAME = "gpucluster-bootstrap.service"
BOOTSTRAP_UNIT_PATH = f"/etc/systemd/system/{BOOTSTRAP_UNIT_NAME}"
BOOTSTRAP_WANTS_DROP_IN_PATH = "/etc/systemd/system/multi-user.target.d/gpucluster-bootstrap.conf"
"""`multi-user.target` wants the unit: `systemctl enable` as a plain file cloud-init can write."""

MODULES_LOAD_KUBERNETES_PATH = "/etc/modules-load.d/kubernetes.conf"
MODULES_LOAD_RDMA_PATH = "/etc/modules-load.d/gpucluster-rdma.conf"
RDMA_NAMING_RULES_PATH = "/etc/udev/rules.d/60-rdma-persistent-naming.rules"
"""Replaces rdma-core's rule of the same name: RDMA devices keep the kernel's name (vmw_pvrdma0)."""
SYSCTL_PATH = "/etc/sysctl.d/99-kubernetes.conf"
NETWORKMANAGER_CALICO_PATH = "/etc/NetworkManager/conf.d/calico.conf"

API_SERVER_CONFIG_DIR = "/etc/kubernetes/gpucluster"
"""Control-plane nodes: the API server's admission, audit and encryption settings (api_server.py),
mounted read-only into the kube-apiserver static pod."""
ADMISSION_CONFIG_PATH = f"{API_SERVER_CONFIG_DIR}/admission-configuration.yaml"
AUDIT_POLICY_PATH = f"{API_SERVER_CONFIG_DIR}/audit-policy.yaml"
ENCRYPTION_CONFIG_PATH = f"{API_SERVER_CONFIG_DIR}/encryption-configuration.yaml"
"""0600: holds the keys that encrypt Secrets in etcd."""
AUDIT_LOG_DIR = "/var/log/kubernetes/audit"
AUDIT_LOG_PATH = f"{AUDIT_LOG_DIR}/audit.log"

FIREWALL_RULES_PATH = "/etc/gpucluster/firewall.nft"
"""The node's nftables table (firewall.py), loaded by `FIREWALL_UNIT_NAME`."""
FIREWALL_UNIT_NAME = "gpucluster-firewall.service"
FIREWALL_UNIT_PATH = f"/etc/systemd/system/{FIREWALL_UNIT_NAME}"
KUBELET_WANTS_FIREWALL_PATH = "/etc/systemd/system/kubelet.service.d/05-gpucluster-firewall.conf"
"""The kubelet starts only after the firewall unit (kubeadm's own drop-in is 10-kubeadm.conf)."""
FIREWALL_SYNC_SCRIPT_PATH = "/usr/local/sbin/gpucluster-firewall-sync.sh"
"""Control-plane nodes: sets the firewall's control-plane set from etcd's member list."""
FIREWALL_SYNC_UNIT_PATH = "/etc/systemd/system/gpucluster-firewall-sync.service"
FIREWALL_SYNC_TIMER_PATH = "/etc/systemd/system/gpucluster-firewall-sync.timer"
KUBELET_WANTS_FIREWALL_SYNC_PATH = "/etc/systemd/system/kubelet.service.d/06-gpucluster-firewall-sync.conf"
"""Control-plane nodes: the kubelet (etcd's static pod) brings the membership sync's timer."""

CONTAINERD_CONFIG_PATH = "/etc/containerd/config.toml"
CONTAINERD_CERTS_DIR = "/etc/containerd/certs.d"
"""containerd's registry host directory (`config_path`; containerd docs/hosts.md): one
`<host[:port]>/hosts.toml` per registry. The bootstrap sets `config_path` to it."""
MIRROR_CA_PATH = "/etc/pki/ca-trust/source/anchors/gpucluster-mirror.crt"
"""The site CA of the mirror in the node's trust store (Rocky/RHEL: `update-ca-trust` reads the
anchors folder, then curl and every OpenSSL/NSS client trust it)."""
CONTROL_PLANE_JOIN_ENV_PATH = "/etc/gpucluster/control-plane-join.env"
"""Joining control-plane nodes: the short-lived join token and the certificate key that open the
two Secrets they fetch (control_plane_join.py). 0600, removed once the node is bootstrapped."""
CLUSTER_CA_CERT_PATH = "/etc/gpucluster/cluster-ca.crt"
PKI_HANDOFF_SIGNER_PATH = "/etc/gpucluster/pki-handoff-signer.pem"
"""First control-plane node only: the public half of the stack's key hand-off signing key; the
node opens no sealed keys without its signature (components/vsphere/key_handoff.py)."""
"""Joining control-plane nodes: the cluster CA certificate (public), which the script checks
against the CA pin and then trusts for the fetch of the sealed EncryptionConfiguration."""
