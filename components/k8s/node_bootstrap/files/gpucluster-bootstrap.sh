#!/bin/bash
# Node bootstrap of vsphere-gpu-cluster: makes this VM a node of the kubeadm cluster.
#
# One static script for every node (components/k8s/node_bootstrap/files/ in the repository).
# What differs per node comes from /etc/gpucluster/bootstrap.env, written by cloud-init and read
# by gpucluster-bootstrap.service (EnvironmentFile=). Run it through the unit:
#   systemctl start gpucluster-bootstrap.service; journalctl -u gpucluster-bootstrap
#
# Safe to run any number of times and to cut at any point (power loss, a failed stage, the unit
# restarting it): each stage first looks for its own evidence on disk and skips what is done.
# It never runs `kubeadm reset` on a node that has initialised or joined the cluster.
#
# Stages: host settings, RDMA devices (RDMA nodes), vGPU and containerd's NVIDIA runtime (GPU
# nodes), then by role: kubeadm init and Calico (init), kubeadm join (others), then done. The
# init node joins instead when the cluster already runs (a replaced VM: see first_node_joins).
set -euo pipefail

# Settings (bootstrap.env). GPUCLUSTER_ROOT prefixes every path this script reads or writes:
# empty on a node; the tests run the script in a temporary root.
root=${GPUCLUSTER_ROOT:-}
role=${GPUCLUSTER_ROLE:-}
api_endpoint=${GPUCLUSTER_API_ENDPOINT:-}
gpu=${GPUCLUSTER_GPU:-false}
rdma=${GPUCLUSTER_RDMA:-false}
nvidia_handler=${GPUCLUSTER_NVIDIA_RUNTIME_HANDLER:-}
nvidia_toolkit_minimum=${GPUCLUSTER_NVIDIA_TOOLKIT_MINIMUM:-}
containerd_floors=${GPUCLUSTER_CONTAINERD_FLOORS:-}
calico_manifest=${GPUCLUSTER_CALICO_MANIFEST:-}
calico_manifest_sha256=${GPUCLUSTER_CALICO_MANIFEST_SHA256:-}
image_registry=${GPUCLUSTER_IMAGE_REGISTRY:-}
control_plane_peers=${GPUCLUSTER_CONTROL_PLANE_PEERS:-}
sandbox_image=${GPUCLUSTER_SANDBOX_IMAGE:-}
mirror_ca=${GPUCLUSTER_MIRROR_CA:-}

state_dir=$root/var/lib/gpucluster
done_marker=$state_dir/bootstrap.done
pki_staging=$state_dir/pki
kube_dir=$root/etc/kubernetes
kubeadm_config=$kube_dir/kubeadm-config.yaml
kubeadm_join_config=$kube_dir/kubeadm-join.yaml  # init node only: used when it joins instead
join_config=$kubeadm_config                       # what `kubeadm join` reads on this node
joins_running_cluster=$state_dir/joins-running-cluster
# Joining control-plane nodes only: the short-lived token and certificate key, and the CA certificate.
control_plane_join_env=$root/etc/gpucluster/control-plane-join.env
cluster_ca_cert=$root/etc/gpucluster/cluster-ca.crt
encryption_config=$kube_dir/gpucluster/encryption-configuration.yaml
admin_conf=$kube_dir/admin.conf
kubelet_conf=$kube_dir/kubelet.conf
manifests=$kube_dir/manifests
containerd_config=$root/etc/containerd/config.toml
containerd_certs_dir=/etc/containerd/certs.d  # config_path, as containerd reads it on the node
nvidia_toolkit_config=$root/etc/nvidia-container-runtime/config.toml

log() { echo "gpucluster: $*"; }
die() {
  echo "gpucluster: ERROR: $*" >&2
  exit 1
}

# retry ATTEMPTS COMMAND...: run COMMAND until it succeeds, waiting 5 s, 10 s, ... (at most 60 s)
# in between; after ATTEMPTS failures return 1 (the unit then starts the whole script again).
retry() {
  local attempts=$1 n=1 delay=5
  shift
  until "$@"; do
    if [ "$n" -ge "$attempts" ]; then
      log "giving up after $n attempts: $*" >&2
      return 1
    fi
    log "attempt $n failed, retrying in ${delay}s: $*" >&2
    sleep "$delay"
    n=$((n + 1))
    delay=$((delay * 2 > 60 ? 60 : delay * 2))
  done
}

any_exists() {  # any_exists PATH...: true when one of the (globbed) paths exists
  local path
  for path in "$@"; do
    [ -e "$path" ] && return 0
  done
  return 1
}

# --- host settings: every run (all idempotent) --------------------------------------------------
stage_host() {
  swapoff -a
  if [ -f "$root/etc/fstab" ]; then
    sed -ri '/\sswap\s/s/^([^#])/#\1/' "$root/etc/fstab"
  fi
  modprobe overlay
  modprobe br_netfilter
  sysctl -p "$root/etc/sysctl.d/99-kubernetes.conf"  # only ours: --system fails on unrelated keys
  # Calico programs iptables/nftables itself; firewalld would fight it (Calico's requirements).
  systemctl disable --now firewalld 2>/dev/null || true
  # Our own table instead: etcd, the kubelet and host-network job ports for the cluster only
  # (firewall.nft). Loaded before kubeadm starts anything; on later boots the kubelet wants it.
  if [ -f "$root/etc/gpucluster/firewall.nft" ]; then
    systemctl start gpucluster-firewall.service ||
      die "the node firewall did not load (journalctl -u gpucluster-firewall; nft -c -f /etc/gpucluster/firewall.nft)"
  fi
  if systemctl is-active --quiet NetworkManager; then
    systemctl reload NetworkManager
  fi
  trust_mirror_ca
  check_containerd_version
  configure_containerd
  systemctl enable --now containerd
  systemctl enable kubelet
}

# The mirror's site CA (cloud-init wrote it to the anchors folder): into the trust store, so every
# client on the node trusts the mirror (Rocky/RHEL: update-ca-trust(8) reads the anchors).
trust_mirror_ca() {
  [ -n "$mirror_ca" ] || return 0
  [ -f "$root$mirror_ca" ] || die "$mirror_ca is missing: cloud-init did not write this node's files (mirror.caBundle)"
  update-ca-trust extract || die "update-ca-trust extract failed: the site CA $mirror_ca is not trusted"
}

# The template's containerd must be one containerd recommends for this cluster's Kubernetes minor:
# GPUCLUSTER_CONTAINERD_FLOORS is that minor's row of containerd's RELEASES.md "Kubernetes Support"
# (components/k8s/version_policy.py), the oldest patch of each line, newest line first (2.3.0,2.2.0).
# A line newer than the row's passes; a listed line below its floor, or an older line, does not.
# `containerd --version` prints "containerd <package> <version> <revision>" (containerd
# cmd/containerd/command/main.go): "containerd containerd.io 2.3.1 ..." from Docker's package,
# "... github.com/containerd/containerd/v2 v2.3.1 ..." upstream, "... 1.6.20~ds1 ..." on Debian.
check_containerd_version() {
  local output version floor major minor
  local -a floors
  [ -n "$containerd_floors" ] || die "GPUCLUSTER_CONTAINERD_FLOORS is not set (/etc/gpucluster/bootstrap.env)"
  output=$(containerd --version) || die "'containerd --version' failed: containerd is missing or broken"
  version=$(sed -En '1s/^containerd [^ ]+ v?([0-9]+\.[0-9]+\.[0-9]+).*/\1/p' <<<"$output")
  [ -n "$version" ] || die "cannot read containerd's version from 'containerd --version': $output"
  IFS=, read -ra floors <<<"$containerd_floors"
  IFS=. read -r major minor _ <<<"${floors[0]}"
  if version_at_least "$version" "$major.$((minor + 1)).0"; then
    log "containerd $version (newer than the recommended lines: ${containerd_floors//,/+, }+)"
    return 0
  fi
  for floor in "${floors[@]}"; do
    if [ "${version%.*}" = "${floor%.*}" ] && version_at_least "$version" "$floor"; then
      log "containerd $version (at least $floor)"
      return 0
    fi
  done
  die "containerd $version is not one containerd recommends for this cluster's Kubernetes minor" \
    "(RELEASES.md, 'Kubernetes Support': ${containerd_floors//,/+, }+). Rebuild the template with" \
    "templates/rocky9/ks.cfg's containerd.io pin (templates/README.md); this node does not join."
}

# containerd's pod sandbox (pause) image and its registry folder, before the kubelet starts: the
# template writes `containerd config default` (templates/rocky9/ks.cfg), whose sandbox is
# registry.k8s.io's pause and whose config_path is empty (1.x) or also reads /etc/docker/certs.d
# (2.x). Config version 2 (containerd 1.6/1.7) spells the sandbox `sandbox_image` in the CRI
# section, version 3 (2.x) `sandbox` under `io.containerd.cri.v1.images'.pinned_images`; both read
# each registry's certs.d/<host>/hosts.toml from config_path (containerd docs/hosts.md), where
# cloud-init wrote the mirror's. Edited in place (containerd 1.x would replace the whole CRI
# section with an imported drop-in's), checked in containerd's own dump, restarted when changed.
configure_containerd() {
  local version key before dump settings restart_owed=$state_dir/containerd-restart-owed
  [ -n "$sandbox_image" ] || die "GPUCLUSTER_SANDBOX_IMAGE is not set (/etc/gpucluster/bootstrap.env)"
  [ -f "$containerd_config" ] ||
    die "$containerd_config is missing: the template must write 'containerd config default' there (templates/rocky9/ks.cfg)"
  version=$(sed -En 's/^version[[:space:]]*=[[:space:]]*([0-9]+).*/\1/p' "$containerd_config")
  case $version in
    2) key=sandbox_image ;;
    3) key=sandbox ;;
    *) die "$containerd_config has config version '${version:-none}', not 2 (containerd 1.x) or 3 (2.x)" ;;
  esac
  if ! grep -Eq "^[[:space:]]*${key}[[:space:]]*=" "$containerd_config" ||
    ! grep -Eq '^[[:space:]]*config_path[[:space:]]*=' "$containerd_config"; then
    die "$containerd_config has no '$key' or 'config_path' line: write it with 'containerd config default' in the template (templates/rocky9/ks.cfg)"
  fi
  before=$(sha256sum <"$containerd_config")
  sed -Ei -e "s#^([[:space:]]*${key}[[:space:]]*=[[:space:]]*).*#\\1\"$sandbox_image\"#" \
    -e "s#^([[:space:]]*config_path[[:space:]]*=[[:space:]]*).*#\\1\"$containerd_certs_dir\"#" "$containerd_config"
  # Owed until done: a run that stops before the restart leaves the edited file behind, and the
  # next run, finding nothing to change, must still restart containerd onto it.
  [ "$(sha256sum <"$containerd_config")" = "$before" ] || touch "$restart_owed"
  dump=$(containerd --config "$containerd_config" config dump) ||
    die "'containerd config dump' failed: containerd's configuration ($containerd_config) is broken"
  settings=$(containerd_settings) || die "'containerd config dump' failed on $containerd_config"
  [ "${settings% *}" = "$sandbox_image" ] ||
    die "containerd's sandbox image is ${settings% *}, not $sandbox_image, after editing $containerd_config"
  grep -Eq "^[[:space:]]*config_path[[:space:]]*=[[:space:]]*[\"']${containerd_certs_dir}[\"']" <<<"$dump" ||
    die "containerd's config_path is not $containerd_certs_dir after editing $containerd_config"
  if [ -f "$restart_owed" ]; then
    log "containerd: sandbox image $sandbox_image, registry hosts from $containerd_certs_dir"
    systemctl restart containerd
    rm -f "$restart_owed"
  fi
}

# --- RDMA: the device files the RDMA shared device plugin needs ---------------------------------
missing_rdma_devices() {
  local dir=$root/dev/infiniband missing=""
  any_exists "$dir/rdma_cm" || missing="$missing $dir/rdma_cm"
  any_exists "$dir"/uverbs* || missing="$missing $dir/uverbs*"
  any_exists "$dir"/umad* || missing="$missing $dir/umad*"
  echo "${missing# }"
}

stage_rdma() {
  [ "$rdma" = true ] || return 0
  local module missing tries=0
  # Also listed in /etc/modules-load.d/gpucluster-rdma.conf for later boots; loaded now because
  # systemd-modules-load ran before cloud-init wrote that file on the first boot.
  for module in ib_umad ib_uverbs rdma_ucm; do
    modprobe "$module"
  done
  # udev creates the device nodes asynchronously once vmw_pvrdma has registered the device.
  while missing=$(missing_rdma_devices) && [ -n "$missing" ]; do
    if [ "$tries" -ge 12 ]; then
      die "RDMA device files missing: $missing. The RDMA shared device plugin would advertise no" \
        "RDMA resource on this node. Check the PVRDMA NIC (lspci -d 15ad:0820), its driver" \
        "(lsmod | grep vmw_pvrdma) and the modules ib_umad, ib_uverbs, rdma_ucm."
    fi
    tries=$((tries + 1))
    log "waiting for RDMA device files:$missing"
    sleep 5
  done
  log "RDMA device files present under $root/dev/infiniband"
  name_rdma_devices
}

# The PVRDMA device's name: the kernel's (vmw_pvrdma0), which the jobs select (NCCL_IB_HCA=vmw_pvrdma).
# /etc/udev/rules.d/60-rdma-persistent-naming.rules keeps that name (NAME_KERNEL), but on the first
# boot udev loaded vmw_pvrdma and ran rdma-core's own rule before cloud-init wrote ours: on a
# template whose rdma-core keeps upstream's NAME_FALLBACK (Debian, Ubuntu, Fedora; RHEL patches it
# to NAME_KERNEL) the device is already `rocep11s0`, and rdma_rename with NAME_KERNEL only ever
# leaves a name as it is (rdma-core kernel-boot/rdma_rename.c), so it stays until a reboot that a
# new node never gets. Renamed here with iproute2's `rdma dev set OLDNAME name NEWNAME` (its man page, section 8)
# (iproute2). The index is the lowest free one, as the kernel's own "vmw_pvrdma%d" would be.
name_rdma_devices() {
  local class=$root/sys/class/infiniband device name driver n
  for device in "$class"/*; do
    [ -e "$device/device/driver" ] || continue
    name=${device##*/}
    driver=$(cd -P "$device/device/driver" && pwd) || continue
    [ "${driver##*/}" = vmw_pvrdma ] || continue
    case $name in vmw_pvrdma[0-9]*) continue ;; esac
    n=0
    while [ -e "$class/vmw_pvrdma$n" ]; do n=$((n + 1)); done
    command -v rdma >/dev/null ||
      die "RDMA device $name is not named vmw_pvrdma$n, which the jobs select (NCCL_IB_HCA=vmw_pvrdma)," \
        "and 'rdma' (iproute2) is not installed to rename it. Install iproute2 in the template, or" \
        "reboot the node once (the NAME_KERNEL rule then applies)."
    rdma dev set "$name" name "vmw_pvrdma$n" ||
      die "could not rename RDMA device $name to vmw_pvrdma$n (rdma dev set $name name vmw_pvrdma$n)"
    log "RDMA device $name renamed vmw_pvrdma$n (rdma-core's udev rule named it before ours was written)"
  done
}

# --- GPU: the vGPU, then containerd's NVIDIA runtime handler --------------------------------------
containerd_has_handler() {
  local dump
  # containerd's own view of its configuration, with every imported drop-in merged (newer
  # nvidia-ctk writes /etc/containerd/conf.d/99-nvidia.toml and imports it; older ones edit
  # config.toml). The table is ...runtimes.<handler>] in config version 2 and 3 alike.
  dump=$(containerd --config "$containerd_config" config dump) ||
    die "'containerd config dump' failed: containerd's configuration ($containerd_config) is broken"
  grep -Eq "\\.runtimes\\.[\"']?${nvidia_handler}[\"']?\\]" <<<"$dump"
}

containerd_keeps_its_default_runtime() {
  local dump default
  dump=$(containerd --config "$containerd_config" config dump) || return 1
  # containerd 1.x dumps `default_runtime_name = "runc"`, 2.x single quotes (go-toml v2 writes
  # strings as TOML literal strings: `default_runtime_name = 'runc'`, as in containerd issue 10132's
  # `config default` of v2.0.0-rc.1); a runtime name has no quotes.
  default=$(sed -En "/^[[:space:]]*default_runtime_name[[:space:]]*=/{s/^[[:space:]]*default_runtime_name[[:space:]]*=[[:space:]]*[\"']([^\"']*)[\"'].*/\\1/p;q;}" <<<"$dump")
  default=${default:-runc}
  # Its table, or only a subtable (`...runtimes.runc.options]` defines it too).
  grep -Eq "\\.runtimes\\.[\"']?${default}[\"']?[].]" <<<"$dump"
}

# version_at_least VERSION MINIMUM: true when the dotted VERSION (1.17.10) is MINIMUM (1.17.8) or
# later, comparing each part as a number.
version_at_least() {
  local -a have want
  local i
  IFS=. read -ra have <<<"$1"
  IFS=. read -ra want <<<"$2"
  for i in 0 1 2; do
    if [ "$((10#${have[i]:-0}))" -ne "$((10#${want[i]:-0}))" ]; then
      [ "$((10#${have[i]:-0}))" -gt "$((10#${want[i]:-0}))" ]
      return
    fi
  done
}

# The template's NVIDIA Container Toolkit must have the fix for CVE-2025-23266 (a container image
# reaching host root through the toolkit's hook): `nvidia-ctk --version` prints
# "NVIDIA Container Toolkit CLI version 1.17.8" and the commit; nvidia-ctk ships in the same
# release as the runtime and its hooks.
check_nvidia_toolkit_version() {
  local output version
  [ -n "$nvidia_toolkit_minimum" ] ||
    die "GPUCLUSTER_NVIDIA_TOOLKIT_MINIMUM is not set (/etc/gpucluster/bootstrap.env)"
  output=$(nvidia-ctk --version) || die "'nvidia-ctk --version' failed: the NVIDIA Container Toolkit is broken"
  version=$(sed -En '1s/.*version v?([0-9]+\.[0-9]+\.[0-9]+).*/\1/p' <<<"$output")
  [ -n "$version" ] ||
    die "cannot read the NVIDIA Container Toolkit's version from 'nvidia-ctk --version': $output"
  version_at_least "$version" "$nvidia_toolkit_minimum" ||
    die "NVIDIA Container Toolkit $version is older than $nvidia_toolkit_minimum: a container image can" \
      "reach host root through its hook (CVE-2025-23266). Rebuild the GPU template with toolkit" \
      "$nvidia_toolkit_minimum or later (templates/README.md); this node does not join."
  log "NVIDIA Container Toolkit $version (at least $nvidia_toolkit_minimum)"
}

# Which GPUs a container gets is the toolkit's decision (NVIDIA/nvidia-container-toolkit
# internal/config/image/cuda_image.go, CUDA.VisibleDevices). By default it honours
# NVIDIA_VISIBLE_DEVICES from any container, so a pod with `NVIDIA_VISIBLE_DEVICES=all` and no
# `nvidia.com/gpu` limit gets every GPU of the worker. NVIDIA's documented fix (GPU Operator
# "Security Considerations: Preventing Unprivileged Access to GPUs"): ignore the variable in
# unprivileged containers (no CAP_SYS_ADMIN) and take the device list from the device plugin's
# volume mounts (/dev/null bind-mounted under /var/run/nvidia-container-devices, which needs a
# hostPath that Pod Security baseline refuses to tenants). The runtime reads config.toml at every
# container creation: no restart. Set before the join, so no pod starts under the old setting.
toolkit_isolated() {
  grep -qx 'accept-nvidia-visible-devices-envvar-when-unprivileged = false' "$nvidia_toolkit_config" 2>/dev/null &&
    grep -qx 'accept-nvidia-visible-devices-as-volume-mounts = true' "$nvidia_toolkit_config"
}

isolate_nvidia_toolkit() {
  if toolkit_isolated; then
    log "the NVIDIA Container Toolkit already ignores NVIDIA_VISIBLE_DEVICES from unprivileged containers"
    return 0
  fi
  log "making the NVIDIA Container Toolkit take GPUs only from the device plugin (nvidia-ctk config)"
  # `nvidia-ctk config --set KEY=VALUE --in-place` (cmd/nvidia-ctk/config/config.go) loads the
  # file (or the defaults), sets the keys and writes it back, keeping the rest.
  nvidia-ctk config --config-file="$nvidia_toolkit_config" --in-place \
    --set accept-nvidia-visible-devices-envvar-when-unprivileged=false \
    --set accept-nvidia-visible-devices-as-volume-mounts=true ||
    die "nvidia-ctk config could not write $nvidia_toolkit_config"
  toolkit_isolated ||
    die "$nvidia_toolkit_config still lacks 'accept-nvidia-visible-devices-envvar-when-unprivileged = false'" \
      "and 'accept-nvidia-visible-devices-as-volume-mounts = true' after nvidia-ctk config: any pod could" \
      "take this worker's GPUs with NVIDIA_VISIBLE_DEVICES=all; this node does not join."
}

# What the template's containerd must keep through nvidia-ctk, from its config dump: the sandbox
# (pause) image (`sandbox_image` in the CRI section of config version 2, `sandbox` under pinned_images
# in version 3) and whether the default runtime runs with `SystemdCgroup = true` (the kubelet is set
# to the systemd cgroup driver: both must agree). A drop-in that replaces the CRI section with one
# built from defaults keeps a runc table, so the runtime check alone passes it, but resets both
# (containerd config default: pause:3.6, SystemdCgroup = false). Prints "SANDBOX SYSTEMD".
containerd_settings() {
  local dump line table="" default sandbox="" systemd=false
  dump=$(containerd --config "$containerd_config" config dump) || return 1
  default=$(sed -En "/^[[:space:]]*default_runtime_name[[:space:]]*=/{s/^[[:space:]]*default_runtime_name[[:space:]]*=[[:space:]]*[\"']([^\"']*)[\"'].*/\\1/p;q;}" <<<"$dump")
  default=${default:-runc}
  while IFS= read -r line; do
    if [[ $line =~ ^[[:space:]]*\[(.*)\][[:space:]]*$ ]]; then
      table=${BASH_REMATCH[1]}
    elif [[ $line =~ ^[[:space:]]*(sandbox_image|sandbox)[[:space:]]*=[[:space:]]*[\"\']([^\"\']*)[\"\'] ]]; then
      sandbox=${BASH_REMATCH[2]}
    elif [[ $table =~ \.runtimes\.[\"\']?${default}[\"\']?\.options$ && $line =~ ^[[:space:]]*SystemdCgroup[[:space:]]*=[[:space:]]*true ]]; then
      systemd=true
    fi
  done <<<"$dump"
  echo "${sandbox:-unset} $systemd"
}

# The settings as the template had them, kept from before the first nvidia-ctk run (a later boot
# compares against these, not against what a broken drop-in left).
containerd_settings_kept() {
  local kept=$state_dir/containerd-settings now=""
  [ -f "$kept" ] && read -r now <"$kept"
  # Written before nvidia-ctk runs, so a file cut short by a power cut is written again from the
  # same, still untouched configuration.
  if ! [[ $now =~ ^[^[:space:]]+\ (true|false)$ ]]; then
    now=$(containerd_settings) || die "'containerd config dump' failed: containerd's configuration ($containerd_config) is broken"
    mkdir -p "$state_dir"
    echo "$now" >"$kept"
  fi
  echo "$now"
}

containerd_keeps_its_settings() {
  local before after
  before=$(containerd_settings_kept)
  after=$(containerd_settings) || return 1
  [ "${before% *}" = "${after% *}" ] ||
    die "containerd's sandbox image changed from ${before% *} to ${after% *} after nvidia-ctk: its drop-in replaced the CRI section with defaults; upgrade the NVIDIA Container Toolkit in the template (1.17+ has --config-source) or set sandbox_image in the drop-in"
  [ "${after#* }" = true ] ||
    die "containerd's default runtime runs without SystemdCgroup = true$([ "${before#* }" = true ] && echo ' after nvidia-ctk (its drop-in replaced the CRI section with defaults)'), but the kubelet uses the systemd cgroup driver; set SystemdCgroup = true in the template's /etc/containerd/config.toml (templates/README.md) or upgrade the NVIDIA Container Toolkit (1.17+ has --config-source)"
}

stage_gpu() {
  [ "$gpu" = true ] || return 0
  # A vGPU attached after the clone comes with a power cycle of the VM, which interrupts this
  # wait; the unit runs the script again on the next boot. Joining before would register a node
  # without a GPU.
  until grep -qsx 0x10de "$root"/sys/bus/pci/devices/*/vendor; do
    log "waiting for the vGPU to be attached (an NVIDIA PCI function, vendor 0x10de)"
    sleep 15
  done
  if [ -z "$nvidia_handler" ]; then
    log "containerd's NVIDIA runtime is left to the GPU Operator"
    return 0
  fi
  command -v nvidia-smi >/dev/null ||
    die "nvidia-smi not found: the template lacks the NVIDIA vGPU guest driver (docs/bootstrap.md)"
  nvidia-smi -L >/dev/null ||
    die "nvidia-smi -L failed: the NVIDIA driver does not see the vGPU (driver/vGPU manager mismatch?)"
  command -v nvidia-ctk >/dev/null ||
    die "nvidia-ctk not found: the template lacks the NVIDIA Container Toolkit (docs/bootstrap.md)"
  check_nvidia_toolkit_version
  isolate_nvidia_toolkit
  if containerd_has_handler; then
    containerd_keeps_its_default_runtime ||
      die "containerd has the runtime handler '$nvidia_handler' but lost its default runtime: a drop-in replaced the CRI section; remove it or rerun nvidia-ctk with --config-source=command (NVIDIA Container Toolkit 1.17+)"
    containerd_keeps_its_settings
    log "containerd already has the runtime handler '$nvidia_handler'"
    return 0
  fi
  containerd_settings_kept >/dev/null
  log "adding the runtime handler '$nvidia_handler' to containerd (nvidia-ctk)"
  # Not the default runtime (no --nvidia-set-as-default): only pods of the RuntimeClass
  # '$nvidia_handler' get the NVIDIA runtime.
  # containerd 1.x replaces a whole plugin section with an imported one (services/server/config/
  # config.go, mergeConfig), so a drop-in holding only the nvidia runtime would drop runc and the
  # CRI plugin would not load. `--config-source=command` makes nvidia-ctk start from `containerd
  # config dump`, so its drop-in carries the whole CRI section (NVIDIA/k8s-device-plugin PR 1145,
  # nvidia-container-toolkit PR 686); toolkits without the flag edit config.toml in place.
  local source_flag=()
  if nvidia-ctk runtime configure --help 2>&1 | grep -q -- '--config-source'; then
    source_flag=(--config-source=command)
  fi
  nvidia-ctk runtime configure --runtime=containerd --config="$containerd_config" \
    --nvidia-runtime-name="$nvidia_handler" "${source_flag[@]}"
  systemctl restart containerd
  containerd_has_handler ||
    die "containerd still has no runtime handler '$nvidia_handler' after nvidia-ctk runtime configure"
  containerd_keeps_its_default_runtime ||
    die "containerd lost its default runtime after nvidia-ctk runtime configure: its drop-in replaced the CRI section; upgrade the NVIDIA Container Toolkit in the template (1.17+ has --config-source)"
  containerd_keeps_its_settings
}

# --- the init node: its keys, sealed to a key made here, never in user-data ----------------------
# No cluster runs yet whose TLS could carry them, and everything in user-data is readable in
# vCenter. So this node makes an RSA key, posts its certificate to the VM's guestinfo, and the stack
# answers with the shared PKI and the Secrets encryption keys sealed to it and signed with the
# stack's hand-off key (open_envelope), then removes both from the VM (components/vsphere/
# key_handoff.py, pki_delivery.py). The key never leaves this directory and is deleted once the
# envelope is open: no copy of the envelope (vCenter's events, vmware.log) opens after that. A
# replaced first node receives its keys the same way, whether it then inits or joins. Only what the
# openssl command line opens, every key read from a file (never on a command line: any local user
# reads /proc/PID/cmdline), and only algorithms a FIPS-mode template allows (RSA-OAEP, AES-CBC,
# ECDSA P-256, SHA-256).
guestinfo_get() {  # guestinfo_get KEY: a guestinfo value, or nothing when the VM has none
  vmware-rpctool "info-get guestinfo.$1" 2>/dev/null || true
}

pki_handoff_dir=$state_dir/pki-handoff
pki_handoff_signer=$root/etc/gpucluster/pki-handoff-signer.pem  # public, from user-data

certificate_fingerprint() {  # certificate_fingerprint CERT: sha256:<hex> of its DER
  openssl x509 -in "$1" -outform der | sha256sum | sed 's/ .*//; s/^/sha256:/'
}

# Tells the stack the keys arrived (it stops waiting and removes the envelope), then forgets the
# certificate. Failing here leaves the certificate, so the next run (the unit restarts it) answers.
acknowledge_pki() {
  vmware-rpctool "info-set guestinfo.gpucluster.pki.received $(certificate_fingerprint "$pki_handoff_dir/handoff.crt")" >/dev/null ||
    die "could not tell the stack this node's keys arrived (vmware-rpctool info-set)"
  rm -rf "$pki_handoff_dir"
}

# open_envelope ENVELOPE: the bundle sealed to this node's key, into $pki_handoff_dir/bundle.tgz.
# `v2.<certificate fingerprint>.<CMS EnvelopedData>.<signature>` (key_handoff.py, seal_bundle): the
# stack's ECDSA signature over the rest is checked first, with the public key from user-data, so
# an envelope anyone else wrote to guestinfo (a vCenter user, a process in this guest) is refused
# unopened; then that it answers this node's certificate; then `openssl cms -decrypt` opens it with
# this node's key (RSA-OAEP, then AES-256-CBC inside openssl: no key on a command line). Says why
# when it does not open.
open_envelope() {
  local dir=$pki_handoff_dir version fingerprint cms signature
  IFS=. read -r version fingerprint cms signature <<<"$1"
  if [ "$version" != v2 ] || [ -z "$signature" ]; then
    log "the sealed keys in guestinfo are not in a form this script opens (version '$version')" >&2
    return 1
  fi
  [ -s "$pki_handoff_signer" ] ||
    die "$pki_handoff_signer is missing: cloud-init did not write this node's files, and no sealed keys are opened without it"
  printf '%s.%s.%s' "$version" "$fingerprint" "$cms" >"$dir/envelope.signed"
  printf '%s' "$signature" | openssl base64 -d -A >"$dir/envelope.sig"
  if ! openssl dgst -sha256 -verify "$pki_handoff_signer" -signature "$dir/envelope.sig" "$dir/envelope.signed" \
    >"$dir/openssl.err" 2>&1; then
    log "the sealed keys in guestinfo are not signed by the stack's hand-off key: refusing them (someone else wrote them?)" >&2
    return 1
  fi
  if [ "sha256:$fingerprint" != "$(certificate_fingerprint "$dir/handoff.crt")" ]; then
    log "the sealed keys in guestinfo answer another certificate (sha256:$fingerprint: an earlier request?)" >&2
    return 1
  fi
  printf '%s' "$cms" | openssl base64 -d -A >"$dir/envelope.der"
  if ! (umask 077 && openssl cms -decrypt -inform DER -in "$dir/envelope.der" -inkey "$dir/handoff.key" \
    -recip "$dir/handoff.crt" -out "$dir/bundle.tgz" 2>"$dir/openssl.err"); then
    log "the sealed keys in guestinfo do not open with this node's key: $(sed -n 1p "$dir/openssl.err")" >&2
    return 1
  fi
}

# bundle_has_only_files BUNDLE: whether every member of the tar is a regular file or a directory.
# tar would extract a symlink, a hard link, a device or a fifo as such, and the chmod and mv that
# follow act on what a link points at (a member `ca.crt` linking to /etc/shadow makes it 0644: GNU
# tar 1.34). `tar -tv` starts each line with the member's type as `ls -l` does ('-' file, 'd'
# directory; 'l', 'h', 'c', 'b', 'p' the rest), and quotes odd characters in names (escape
# style), so one member is one line.
bundle_has_only_files() {
  local listing
  listing=$(tar -tvzf "$1") || return 1
  [ -n "$listing" ] && ! grep -qv '^[-d]' <<<"$listing"
}

receive_pki() {
  local dir=$pki_handoff_dir request envelope seen="" n=0 delay=5 tool member
  if [ -f "$pki_staging/ca.key" ] && [ -f "$encryption_config" ]; then
    [ ! -f "$dir/handoff.crt" ] || acknowledge_pki
    return 0
  fi
  for tool in openssl tar gzip vmware-rpctool; do
    command -v "$tool" >/dev/null ||
      die "$tool is missing: the first control-plane node needs it to receive its keys (templates/rocky9/ks.cfg installs it: rebuild the template)"
  done
  (umask 077 && mkdir -p "$dir")
  if [ ! -f "$dir/handoff.key" ]; then
    (umask 077 && openssl req -x509 -newkey rsa:2048 -nodes -days 7 -subj "/CN=gpucluster-pki-handoff" \
      -keyout "$dir/handoff.key.part" -out "$dir/handoff.crt" 2>"$dir/openssl.err") ||
      die "could not make the key the stack seals this node's keys to: $(sed -n 1p "$dir/openssl.err")"
    mv "$dir/handoff.key.part" "$dir/handoff.key"
  fi
  request=$(openssl x509 -in "$dir/handoff.crt" -outform der | openssl base64 -A)
  log "asking the stack for this node's keys (certificate $(certificate_fingerprint "$dir/handoff.crt")); pulumi up delivers them"
  while :; do
    # Posted again whenever guestinfo holds another request (one set by someone else): the stack
    # seals to one request only and fails loudly on a second (pki_delivery.py), so this is what
    # makes someone else's request seen.
    if [ "$(guestinfo_get gpucluster.pki.request)" != "$request" ]; then
      vmware-rpctool "info-set guestinfo.gpucluster.pki.request $request" >/dev/null ||
        die "could not post this node's key request to guestinfo (vmware-rpctool info-set; a VM with isolation.tools.setinfo.disable=TRUE forbids it)"
    fi
    envelope=$(guestinfo_get gpucluster.pki.envelope)
    # Each envelope is tried once: one that did not open will not open later.
    if [ -n "$envelope" ] && [ "$envelope" != "$seen" ]; then
      seen=$envelope
      open_envelope "$envelope" && break
    fi
    n=$((n + 1))
    [ "$n" -lt 120 ] || die "no sealed keys for this node after $n checks: run pulumi up (InitPkiDelivery delivers them)"
    log "sealed keys not delivered yet (check $n); next check in ${delay}s"
    sleep "$delay"
    delay=$((delay * 2 > 30 ? 30 : delay * 2))
  done
  # Signed by the stack, but checked all the same before anything is extracted, moved or chmodded.
  bundle_has_only_files "$dir/bundle.tgz" ||
    die "the sealed keys hold a member that is not a regular file (a link, a device, a fifo): refusing the bundle"
  rm -rf "$dir/open"
  (umask 077 && mkdir -p "$dir/open" &&
    tar -xzf "$dir/bundle.tgz" -C "$dir/open" --no-same-owner --no-same-permissions \
      ca.crt ca.key front-proxy-ca.crt front-proxy-ca.key etcd/ca.crt etcd/ca.key sa.key sa.pub \
      encryption-configuration.yaml) || die "the sealed keys opened but are not the bundle the stack makes"
  for member in ca.crt ca.key front-proxy-ca.crt front-proxy-ca.key etcd/ca.crt etcd/ca.key sa.key sa.pub \
    encryption-configuration.yaml; do
    if [ -L "$dir/open/$member" ] || [ ! -f "$dir/open/$member" ]; then
      die "the sealed keys' $member is not a regular file: refusing the bundle"
    fi
  done
  chmod 0644 "$dir/open/ca.crt" "$dir/open/front-proxy-ca.crt" "$dir/open/etcd/ca.crt" "$dir/open/sa.pub"
  mkdir -p "${encryption_config%/*}"
  mv "$dir/open/encryption-configuration.yaml" "$encryption_config"
  rm -rf "$pki_staging"
  mv "$dir/open" "$pki_staging"
  # The key first: from here on no copy of the envelope opens.
  rm -f "$dir/handoff.key" "$dir/envelope.der" "$dir/bundle.tgz"
  log "received this node's keys, sealed to its own key"
  acknowledge_pki
}

# --- control plane: the shared PKI, then kubeadm init or join -------------------------------------
# Only the init node stages the PKI (received above; its replacement joins with it); the other
# control-plane nodes' kubeadm join downloads it from kubeadm-certs with their certificate key.
install_pki() {
  [ -d "$pki_staging" ] || return 0
  mkdir -p "$kube_dir/pki"
  cp -a "$pki_staging/." "$kube_dir/pki/"
}

# --- joining control-plane nodes: the Secrets encryption keys, fetched, never in user-data --------
# The stack sealed the API server's EncryptionConfiguration with this node's certificate key into
# the Secret kube-system/gpucluster-encryption-config, which only the short-lived control-plane
# join token may read and which goes with that token (node_bootstrap/control_plane_join.py). The
# API server that kubeadm join starts reads the file when it starts: it is fetched before the join.
control_plane_join_setting() {  # control_plane_join_setting NAME: a value of the 0600 settings file
  sed -n "s/^$1=//p" "$control_plane_join_env"
}

ca_pin() {  # ca_pin CERT: kubeadm's sha256:<hex> pin of the certificate's public key (SPKI)
  openssl x509 -in "$1" -noout -pubkey | openssl pkey -pubin -outform der | sha256sum | sed 's/ .*//; s/^/sha256:/'
}

# The Secret is opened in Python, not with the openssl command line: `openssl dgst -mac HMAC` and
# `openssl enc` take keys only as arguments, and /proc/PID/cmdline is any local user's to read
# (issue 53 item 3); the certificate key also opens kubeadm-certs, the cluster's CA keys. The
# program reads the key from the 0600 settings file and writes the plaintext 0600. The keys and
# the MAC are the standard library's; AES-256-CTR is `cryptography`'s (python3-cryptography, in the
# template's kickstart), as control_plane_join.seal uses it: modes.CTR with the 16-byte IV as the
# whole initial counter block, which is also what `openssl enc -aes-256-ctr -iv` does. A template
# built before it carried python3-cryptography still joins: only the AES step falls back to
# `openssl enc -K`, which puts the derived AES key (it opens this Secret, not kubeadm-certs) on a
# command line, and the log says so and how to fix it. Written for Python 3.6 and cryptography
# 2.x as well (EL8's platform-python): no newer syntax, an explicit backend.
open_sealed_program() {
  cat <<'PY'
import base64, hashlib, hmac, json, os, subprocess, sys

settings_path, response_path, out_path = sys.argv[1:4]
key_hex = ""
with open(settings_path) as settings:
    for line in settings:
        name, _, value = line.rstrip("\n").partition("=")
        if name == "GPUCLUSTER_CERTIFICATE_KEY":
            key_hex = value
if not key_hex:
    sys.exit("no GPUCLUSTER_CERTIFICATE_KEY in " + settings_path)
key = bytes.fromhex(key_hex)
encryption_key = hmac.new(key, b"gpucluster encryption-config aes-256-ctr", hashlib.sha256).digest()
mac_key = hmac.new(key, b"gpucluster encryption-config hmac-sha256", hashlib.sha256).digest()
try:
    with open(response_path) as response:
        data = json.load(response)["data"]
    iv, ciphertext, mac = (base64.b64decode(data.get(n, "")).decode("ascii") for n in ("iv", "ciphertext", "mac"))
    expected = hmac.new(mac_key, (iv + ":" + ciphertext).encode(), hashlib.sha256).hexdigest()
    if not mac or not hmac.compare_digest(expected, mac):
        raise ValueError("MAC mismatch")
    sealed, counter = base64.b64decode(ciphertext), bytes.fromhex(iv)
except (KeyError, TypeError, ValueError):  # binascii.Error and JSON errors are ValueErrors
    sys.exit(3)
fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
with os.fdopen(fd, "wb") as out:
    try:
        from cryptography.hazmat.backends import default_backend
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    except ImportError:
        print("openssl")
        sys.stdout.flush()
        subprocess.run(["openssl", "enc", "-d", "-aes-256-ctr", "-K", encryption_key.hex(), "-iv", iv],
                       input=sealed, stdout=out, check=True)
    else:
        cipher = Cipher(algorithms.AES(encryption_key), modes.CTR(counter), backend=default_backend())
        decryptor = cipher.decryptor()
        out.write(decryptor.update(sealed) + decryptor.finalize())
PY
}

# The interpreter that opens it: EL8's platform-python (dnf's own, always installed, unlike its
# python3), else python3 (EL9's system Python; cloud-init's own wherever cloud-init runs).
sealed_python() {
  if [ -x "$root/usr/libexec/platform-python" ]; then
    echo "$root/usr/libexec/platform-python"
  else
    command -v python3 || true
  fi
}

fetch_encryption_config() {
  [ ! -f "$encryption_config" ] || return 0
  if [ ! -f "$control_plane_join_env" ] || [ ! -f "$cluster_ca_cert" ]; then
    die "$encryption_config is missing and so is $control_plane_join_env: cloud-init did not write this node's files"
  fi
  local python pin response=$state_dir/encryption-config.json header=$state_dir/encryption-config.header
  python=$(sealed_python)
  [ -n "$python" ] ||
    die "no python3 on this node: a joining control-plane node opens its encryption keys with its certificate key in python3 (cloud-init's own interpreter; rebuild the template with it)"
  pin=$(control_plane_join_setting GPUCLUSTER_CA_CERT_HASH)
  [ "$(ca_pin "$cluster_ca_cert")" = "$pin" ] ||
    die "$cluster_ca_cert does not match the CA pin $pin: not fetching the encryption keys from a server it vouches for"
  # The token in a 0600 file, not on curl's command line (which any local user can read).
  (umask 077 && printf 'Authorization: Bearer %s\n' "$(control_plane_join_setting GPUCLUSTER_JOIN_TOKEN)" >"$header")
  rm -f "$response"
  (umask 077 && curl -fsS --cacert "$cluster_ca_cert" --connect-timeout 10 --max-time 60 -H "@$header" \
    -o "$response" "https://$api_endpoint/api/v1/namespaces/kube-system/secrets/gpucluster-encryption-config") || {
    log "could not fetch the encryption keys (not written yet, or the token expired: run pulumi up again)" >&2
    return 1
  }
  local opened_with status=0 errors=$state_dir/encryption-config.err
  mkdir -p "${encryption_config%/*}"
  opened_with=$(umask 077 && open_sealed_program |
    "$python" - "$control_plane_join_env" "$response" "$encryption_config.part" 2>"$errors") || status=$?
  if [ "$status" -ne 0 ]; then
    rm -f "$encryption_config.part"
    if [ "$status" -eq 3 ]; then
      log "the sealed encryption keys do not open with this node's certificate key" >&2
    else
      log "could not open the sealed encryption keys with $python: $(sed -n '$p' "$errors")" >&2
    fi
    return 1
  fi
  if [ "$opened_with" = openssl ]; then
    log "warning: rebuild the template: it lacks python3-cryptography; until then the Secret's AES key (derived from the certificate key, not the key itself) passes on openssl's command line" >&2
  fi
  mv "$encryption_config.part" "$encryption_config"
  rm -f "$response" "$header" "$errors"
}

# kubeadm init got past its kubeconfig phase (admin.conf exists) but did not finish: run the
# phases again one by one. Each one is idempotent: files valid for our CA are kept, manifests
# rewritten with the same content, API objects created or updated.
finish_init() {
  log "kubeadm init was cut short after writing admin.conf: completing its phases"
  kubeadm init phase certs all --config "$kubeadm_config"
  kubeadm init phase kubeconfig all --config "$kubeadm_config"
  kubeadm init phase etcd local --config "$kubeadm_config"
  kubeadm init phase control-plane all --config "$kubeadm_config"
  kubeadm init phase kubelet-start --config "$kubeadm_config"
  wait_for_api "https://$api_endpoint/readyz"
  retry 10 kubeadm init phase upload-config all --config "$kubeadm_config"
  retry 10 kubeadm init phase mark-control-plane --config "$kubeadm_config"
  retry 10 kubeadm init phase bootstrap-token --config "$kubeadm_config" --skip-token-print
  retry 10 kubeadm init phase kubelet-finalize all --config "$kubeadm_config"
  retry 10 kubeadm init phase addon all --config "$kubeadm_config"
}

stage_init() {
  if [ -f "$state_dir/init.complete" ]; then
    log "kubeadm init already completed"
    return 0
  fi
  if [ -f "$admin_conf" ]; then
    finish_init
  else
    install_pki
    # No separate `kubeadm config images pull`: it pulls every image even when present (cmd/kubeadm/
    # app/cmd/config.go, PullControlPlaneImages), so it fails on an air-gapped site with the images
    # pre-pulled; init's preflight (ImagePullCheck) pulls only the missing ones.
    # No `kubeadm reset` on failure, ever: it would delete etcd's data. What a failed init left
    # is finished by finish_init on the next run (the unit restarts the script).
    kubeadm init --config "$kubeadm_config" --skip-token-print ||
      die "kubeadm init failed; the next run completes it (the unit restarts this script)"
  fi
  touch "$state_dir/init.complete"
}

# fetch_calico_manifest FILE: the pinned tigera-operator.yaml, checked against the SHA-256 recorded
# for the release in the repository (manifests/index.json), then, with a mirror, its images
# moved there: Calico's own procedure for a private registry replaces `quay.io` in this file
# (docs.tigera.io, "Configure use of your image registry"). A file with other bytes is refused,
# whoever serves it: the next run fetches again.
fetch_calico_manifest() {
  local file=$1
  local trust=()
  # The site CA of the mirror's file server (mirror.caBundle): what this download trusts.
  [ -z "$mirror_ca" ] || trust=(--cacert "$root$mirror_ca")
  retry 20 curl -fsSL "${trust[@]}" --connect-timeout 10 --max-time 300 -o "$file.part" "$calico_manifest" ||
    die "could not fetch $calico_manifest"
  local sum
  sum=$(sha256sum "$file.part")
  sum=${sum%% *}
  if [ "$sum" != "$calico_manifest_sha256" ]; then
    rm -f "$file.part"
    die "$calico_manifest has SHA-256 $sum, not the pinned $calico_manifest_sha256: serve Calico ${GPUCLUSTER_CALICO_VERSION:-}'s own manifests/tigera-operator.yaml, unchanged (its URL and SHA-256: the repository's manifests/index.json)"
  fi
  if [ -n "$image_registry" ]; then
    sed -i "s?quay.io/?$image_registry/?g" "$file.part"
  fi
  mv "$file.part" "$file"
}

stage_cni() {
  local kubectl=(kubectl --kubeconfig "$admin_conf") manifest=$state_dir/tigera-operator.yaml
  log "installing Calico (${GPUCLUSTER_CALICO_VERSION:-}) from $calico_manifest"
  fetch_calico_manifest "$manifest"
  # Server-side apply: safe to repeat on every run, and the operator's CRDs are too large for
  # client-side apply's annotation.
  retry 20 "${kubectl[@]}" apply --server-side --force-conflicts -f "$manifest"
  retry 20 "${kubectl[@]}" wait --for condition=established --timeout=60s crd/installations.operator.tigera.io
  retry 20 "${kubectl[@]}" apply --server-side --force-conflicts -f "$kube_dir/calico-installation.yaml"
}

# --- the first control-plane node: a new cluster, or a replaced node joining the running one -----
# probe_peer HOST:PORT: true when a kube-apiserver answers there. GET /readyz is open to anonymous
# requests in a kubeadm cluster: the default ClusterRole system:public-info-viewer allows GET on
# /livez, /readyz, /healthz and /version and is bound to system:unauthenticated (kubernetes
# plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go; KEP-789). Any HTTP status counts:
# 200, 500 (an API server whose etcd is not ready right now) and 401/403 (anonymous requests
# switched off) all come from a running cluster, which a second `kubeadm init` would split.
# -k: this only asks whether a cluster exists; the join itself pins the CA. Short timeouts: a
# peer powered off or dropping packets must not hold the boot (curl waits 300 s to connect and
# has no total limit by default).
probe_peer() {
  local status
  status=$(curl -ks -o /dev/null -w '%{http_code}' --connect-timeout 3 --max-time 5 "https://$1/readyz") ||
    return 1
  log "a Kubernetes API server answers at $1 (HTTP $status)"
}

# cluster_runs: true when one of the other control-plane nodes answers. Three rounds 5 s apart,
# so one lost packet does not decide it; on day one this costs seconds before init (the others
# cannot serve before this node's init: they join it).
cluster_runs() {
  local round peer list
  IFS=, read -ra list <<<"$control_plane_peers"
  [ "${#list[@]}" -gt 0 ] || return 1
  for round in 1 2 3; do
    for peer in "${list[@]}"; do
      probe_peer "$peer" && return 0
    done
    if [ "$round" -lt 3 ]; then
      log "no other control-plane node answers (${list[*]}); checking again in 5s"
      sleep 5
    fi
  done
  return 1
}

# first_node_joins: true when this init node must join the running cluster instead of running
# kubeadm init. A replaced VM (same name, addresses and role) finds the other control-plane nodes
# serving: an init would start a second cluster with an empty etcd beside the running one. Decided
# once per VM, on its own evidence: a node that began kubeadm init completes it (finish_init, even
# if the others joined it since), a node that chose to join keeps joining (the choice is recorded
# before kubeadm join runs), and only a node with neither probes.
first_node_joins() {
  if [ -f "$joins_running_cluster" ]; then
    log "this node joins the running cluster (chosen before: $joins_running_cluster)"
    return 0
  fi
  if [ -f "$state_dir/init.complete" ] || [ -f "$admin_conf" ] || any_exists "$root/var/lib/etcd"/*; then
    return 1
  fi
  if ! cluster_runs; then
    log "no other control-plane node answers: kubeadm init starts the cluster"
    return 1
  fi
  [ -f "$kubeadm_join_config" ] ||
    die "the cluster already runs, but $kubeadm_join_config is missing: cloud-init did not write this node's files"
  log "the cluster already runs: this replaced first control-plane node joins it (no kubeadm init)"
  touch "$joins_running_cluster"
}

# wait_for_api URL: poll the API server's readiness until it answers, however long that takes.
# Only a readiness probe: the join itself authenticates the API server by the CA pin.
wait_for_api() {
  local url=$1 n=0 delay=5
  until curl -ksf -o /dev/null "$url"; do
    n=$((n + 1))
    log "API server at $url not ready (check $n); next check in ${delay}s"
    sleep "$delay"
    delay=$((delay * 2 > 60 ? 60 : delay * 2))
  done
}

# A kubeadm join that failed before the kubelet registered leaves files behind (bootstrap
# kubeconfig, pki/ca.crt, static pod manifests) that fail the next join's preflight. Only then,
# and only on a node that never initialised or joined a cluster, is `kubeadm reset` run.
undo_failed_join() {
  [ "$role" != init ] || die "refusing kubeadm reset on the node that runs kubeadm init"
  # An init node that joins reaches this as control-plane: first_node_joins found no sign of init.
  [ ! -f "$kubelet_conf" ] || die "refusing kubeadm reset: this node has joined ($kubelet_conf exists)"
  if [ -f "$kube_dir/bootstrap-kubelet.conf" ] || any_exists "$manifests"/* ||
    { [ "$role" = worker ] && [ -f "$kube_dir/pki/ca.crt" ]; }; then
    log "cleaning up what the failed join left (the node never registered)"
    kubeadm reset --force
  fi
}

join_once() {
  if [ "$role" = control-plane ]; then
    fetch_encryption_config || return 1
    install_pki
  fi
  if kubeadm join --config "$join_config"; then
    touch "$state_dir/join.complete"
    return 0
  fi
  # kubelet.conf exists once the kubelet has registered: the node has joined, and whatever
  # failed after that is completed below, never undone.
  [ -f "$kubelet_conf" ] && return 0
  undo_failed_join
  return 1
}

stage_join() {
  if [ -f "$state_dir/join.complete" ]; then
    log "kubeadm join already completed"
    return 0
  fi
  if [ -f "$kubelet_conf" ]; then
    log "the kubelet has registered ($kubelet_conf exists): not running kubeadm join again"
  else
    wait_for_api "https://$api_endpoint/readyz"
    # Nodes boot together and etcd adds one member at a time: a join may fail and succeed later.
    retry 10 join_once || die "kubeadm join kept failing; the unit starts the bootstrap again"
  fi
  if [ "$role" = control-plane ] && [ ! -f "$state_dir/join.complete" ]; then
    log "kubeadm join was cut short after the kubelet registered: completing its control-plane phases"
    # Idempotent: kubeadm skips adding an etcd member whose peer URL is already a member.
    retry 10 kubeadm join phase control-plane-join all --config "$join_config"
  fi
  touch "$state_dir/join.complete"
}

# cloud-init's own copies of this node's user-data, which carried the join token and, on
# control-plane nodes, the CA keys: the raw and processed user-data, the merged cloud-config and
# the pickled datasource under each instance directory (cloud-init's helpers.Paths: user-data.txt,
# user-data.txt.i, cloud-config.txt, obj.pkl), and the merged configuration newer cloud-init keeps
# in /run. cloud-init has run this instance's user-data by now and never reads these to decide it
# (its per-instance semaphores under sem/ do, and they stay). Without obj.pkl a later boot reads the
# datasource afresh, as the VMware datasource does on every boot anyway, and writes the copies again
# from what guestinfo then holds: "---" once cloud-init redacted it, nothing once the stack removed
# it (components/vsphere/guestinfo_scrub.py).
forget_cloud_init_copies() {
  local instances=$root/var/lib/cloud/instances
  rm -f "$instances"/*/user-data.txt "$instances"/*/user-data.txt.i "$instances"/*/cloud-config.txt \
    "$instances"/*/obj.pkl "$root/run/cloud-init/combined-cloud-config.json"
}

main() {
  if [ -f "$done_marker" ]; then
    log "already bootstrapped ($done_marker exists)"
    return 0
  fi
  case "$role" in
    init | control-plane | worker) ;;
    *) die "GPUCLUSTER_ROLE is '$role', not init, control-plane or worker: start gpucluster-bootstrap.service, which reads /etc/gpucluster/bootstrap.env" ;;
  esac
  [ -n "$api_endpoint" ] || die "GPUCLUSTER_API_ENDPOINT is not set (/etc/gpucluster/bootstrap.env)"
  mkdir -p "$state_dir"
  if [ ! -f "$kubeadm_config" ]; then
    # Removed only by the last step of a run that completed every stage.
    if [ -f "$admin_conf" ] || [ -f "$kubelet_conf" ]; then
      log "bootstrapped before (its kubeadm config was removed at the end): nothing to do"
      touch "$done_marker"
      return 0
    fi
    die "$kubeadm_config is missing: cloud-init did not write this node's files (cloud-init status --long)"
  fi
  log "bootstrap of ${HOSTNAME:-this node} as $role"
  stage_host
  stage_rdma
  stage_gpu
  [ "$role" != init ] || receive_pki
  if [ "$role" = init ] && first_node_joins; then
    # Exactly what the other control-plane nodes do. Not Calico, nor kubeadm's addons or token:
    # they are cluster state, applied once by the first init and kept in etcd; re-applying the
    # operator manifest with --force-conflicts would take back fields changed since.
    role=control-plane
    join_config=$kubeadm_join_config
  fi
  if [ "$role" = init ]; then
    [ -n "$calico_manifest" ] || die "GPUCLUSTER_CALICO_MANIFEST is not set (/etc/gpucluster/bootstrap.env)"
    [ -n "$calico_manifest_sha256" ] || die "GPUCLUSTER_CALICO_MANIFEST_SHA256 is not set (/etc/gpucluster/bootstrap.env)"
    stage_init
    stage_cni
  else
    stage_join
  fi
  # Neither the join token nor the staged key copies are needed any more, nor cloud-init's copies
  # of the user-data that carried them. Those first: a cut between the two finds the kubeadm config
  # still there on the next start, which then runs to here again.
  forget_cloud_init_copies
  rm -rf "$kubeadm_config" "$kubeadm_join_config" "$pki_staging" "$control_plane_join_env"
  touch "$done_marker"
  log "bootstrap of ${HOSTNAME:-this node} as $role finished"
}

main "$@"
