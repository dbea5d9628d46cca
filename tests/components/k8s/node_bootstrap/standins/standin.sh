#!/bin/bash
# Recording stand-in for the commands the node bootstrap runs: kubeadm, kubectl, systemctl,
# modprobe, rdma, sysctl, swapoff, curl, sleep, containerd, nvidia-smi, nvidia-ctk, update-ca-trust
# and the package managers. One file, linked under each name; it acts on the node's files under $GPUCLUSTER_ROOT
# and keeps the simulated world (API server up, etcd members, injected faults) under $SIM.
#
# No kinder than the real tools: kubeadm init and join run their preflight file and port checks
# (cmd/kubeadm/app/preflight/checks.go: RunInitNodeChecks, RunJoinNodeChecks), join needs a
# reachable API server, kubectl needs its kubeconfig and the API server, reset deletes what the
# real one deletes. Faults are one-shot files under $SIM (fail-init-at, fail-join-at, ...).
# A power cut: $SIM/cut-at holds a call number and $SIM/cut-mode "before" (the call never ran)
# or "after" (it ran, the script never saw it returning); the stand-in then kills the whole
# process group, as losing power would.
set -uo pipefail

name=${0##*/}
R=${GPUCLUSTER_ROOT:?}
K=$R/etc/kubernetes
: "${SIM:?}"

printf '%s\n' "$name $*" >>"$SIM/calls"
count=0
[ -f "$SIM/count" ] && read -r count <"$SIM/count"
count=$((count + 1))
echo "$count" >"$SIM/count"
cut_at=0
cut_mode=before
[ -f "$SIM/cut-at" ] && read -r cut_at <"$SIM/cut-at"
[ -f "$SIM/cut-mode" ] && read -r cut_mode <"$SIM/cut-mode"

power_cut() {
  printf '%s\n' "$name $*" >"$SIM/cut-call"
  kill -KILL 0
}
if [ "$count" = "$cut_at" ] && [ "$cut_mode" = before ]; then
  power_cut "$@"
fi

any() {
  local path
  for path in "$@"; do
    [ -e "$path" ] && return 0
  done
  return 1
}
fail() {
  echo "$name: $*" >&2
  printf '%s\n' "$name: $*" >>"$SIM/failures"
  return 1
}
# one_shot FILE VALUE: true (and the fault removed) when $SIM/FILE holds VALUE.
one_shot() {
  local value=""
  [ -f "$SIM/$1" ] && read -r value <"$SIM/$1"
  if [ "$value" = "$2" ]; then
    rm -f "$SIM/$1"
    return 0
  fi
  return 1
}
# phase_point FAULT PHASE: where kubeadm is between two of its phases. $SIM/cut-in naming PHASE
# cuts the power there (what the phases before it did stays on disk); $SIM/FAULT naming it makes
# kubeadm fail there, once.
phase_point() {
  local cut=""
  [ -f "$SIM/cut-in" ] && read -r cut <"$SIM/cut-in"
  if [ "$cut" = "$2" ]; then
    rm -f "$SIM/cut-in"
    power_cut "kubeadm, in phase $2"
  fi
  if one_shot "$1" "$2"; then
    fail "[$2] injected failure"
    return 1
  fi
}
# countdown FILE: true while $SIM/FILE holds a number above zero (decrementing it).
countdown() {
  local left=0
  [ -f "$SIM/$1" ] && read -r left <"$SIM/$1"
  [ "$left" -gt 0 ] || return 1
  echo $((left - 1)) >"$SIM/$1"
}
write() {  # write PATH [CONTENT]
  mkdir -p "${1%/*}"
  printf '%s\n' "${2:-written by $name}" >"$1"
}
api_up() { [ -f "$SIM/api-up" ]; }
config_arg() {
  local prev="" arg
  for arg in "$@"; do
    case $arg in --config=*) echo "${arg#--config=}" && return ;; esac
    [ "$prev" = --config ] && echo "$arg" && return
    prev=$arg
  done
}
has_arg() {
  local want=$1 arg
  shift
  for arg in "$@"; do
    [ "$arg" = "$want" ] && return 0
  done
  return 1
}

# --- kubeadm ----------------------------------------------------------------------------------
kubelet_configured() { [ -f "$R/var/lib/kubelet/config.yaml" ]; }  # enabled: running after boot

init_phase() {
  case $1 in
    certs)
      if [ ! -f "$K/pki/ca.key" ]; then
        touch "$SIM/minted-ca"  # the real kubeadm silently makes its own CA: Pulumi's is lost
        write "$K/pki/ca.key"
        write "$K/pki/ca.crt"
      fi
      write "$K/pki/apiserver.crt"
      write "$K/pki/apiserver.key"
      ;;
    kubeconfig)
      local conf
      for conf in admin super-admin kubelet controller-manager scheduler; do
        [ -f "$K/$conf.conf" ] || write "$K/$conf.conf"
      done
      ;;
    etcd)
      write "$K/manifests/etcd.yaml"
      write "$R/var/lib/etcd/member/snap/db" "etcd data"
      ;;
    control-plane)
      write "$K/manifests/kube-apiserver.yaml"
      write "$K/manifests/kube-controller-manager.yaml"
      write "$K/manifests/kube-scheduler.yaml"
      ;;
    kubelet-start) write "$R/var/lib/kubelet/config.yaml" ;;
    wait-control-plane) touch "$SIM/api-up" ;;
    upload-config | mark-control-plane | bootstrap-token | kubelet-finalize | addon)
      api_up || fail "[$1] unable to reach the API server" || return 1
      printf '%s\n' "$1" >>"$SIM/cluster-state"
      ;;
    *) fail "unknown init phase $1" ;;
  esac
}

init_preflight() {
  local errors=0 manifest
  for manifest in kube-apiserver kube-controller-manager kube-scheduler etcd; do
    if [ -e "$K/manifests/$manifest.yaml" ]; then
      fail "[ERROR FileAvailable--etc-kubernetes-manifests-$manifest.yaml]: already exists"
      errors=1
    fi
  done
  any "$R/var/lib/etcd"/* && { fail "[ERROR DirAvailable--var-lib-etcd]: /var/lib/etcd is not empty"; errors=1; }
  kubelet_configured && { fail "[ERROR Port-10250]: Port 10250 is in use"; errors=1; }
  [ -e "$K/admin.conf" ] && { fail "[ERROR FileAvailable--etc-kubernetes-admin.conf]: already exists"; errors=1; }
  return "$errors"
}

kubeadm_init() {
  local phase
  init_preflight || return 1
  for phase in certs kubeconfig etcd control-plane kubelet-start wait-control-plane upload-config \
    mark-control-plane bootstrap-token kubelet-finalize addon; do
    phase_point fail-init-at "$phase" || return 1
    init_phase "$phase" || return 1
  done
  printf '%s\n' "init" >>"$SIM/inits"
}

join_preflight() {
  local errors=0 control_plane=$1
  any "$K/manifests"/* && { fail "[ERROR DirAvailable--etc-kubernetes-manifests]: not empty"; errors=1; }
  [ -e "$K/kubelet.conf" ] && { fail "[ERROR FileAvailable--etc-kubernetes-kubelet.conf]: already exists"; errors=1; }
  [ -e "$K/bootstrap-kubelet.conf" ] &&
    { fail "[ERROR FileAvailable--etc-kubernetes-bootstrap-kubelet.conf]: already exists"; errors=1; }
  kubelet_configured && { fail "[ERROR Port-10250]: Port 10250 is in use"; errors=1; }
  if [ "$control_plane" = false ] && [ -e "$K/pki/ca.crt" ]; then
    fail "[ERROR FileAvailable--etc-kubernetes-pki-ca.crt]: already exists"
    errors=1
  fi
  if [ "$control_plane" = true ] && any "$R/var/lib/etcd"/*; then
    fail "[ERROR DirAvailable--var-lib-etcd]: not empty"
    errors=1
  fi
  return "$errors"
}

etcd_member_add() {  # idempotent, as kubeadm's (it skips a peer URL that is already a member)
  grep -qsx "$(cat "$SIM/hostname")" "$SIM/etcd-members" || cat "$SIM/hostname" >>"$SIM/etcd-members"
  write "$K/manifests/etcd.yaml"
  write "$R/var/lib/etcd/member/snap/db" "etcd data"
}

# download_certs CONFIG: kubeadm's download-certs phase, when the JoinConfiguration has a
# controlPlane.certificateKey (copycerts.go, DownloadCerts): the kubeadm-certs Secret must exist
# ($SIM/kubeadm-certs holds the certificate key it was encrypted with; gone once its token
# expired) and open with the key, else the join fails; then the shared PKI is on disk.
download_certs() {
  local key
  key=$(sed -n 's/^ *certificateKey: *//p' "$1")
  [ -n "$key" ] || return 0
  [ -f "$SIM/kubeadm-certs" ] ||
    fail "[download-certs] error downloading the secret: Secret \"kubeadm-certs\" was not found in the \"kube-system\" Namespace" ||
    return 1
  [ "$(cat "$SIM/kubeadm-certs")" = "$key" ] ||
    fail "[download-certs] error decoding secret data with provided key: cipher: message authentication failed" || return 1
  local file
  for file in ca.crt ca.key front-proxy-ca.crt front-proxy-ca.key sa.pub sa.key etcd/ca.crt etcd/ca.key; do
    write "$K/pki/$file" "downloaded $file"
  done
}

kubeadm_join() {
  local config=$1 control_plane=false
  grep -q '^controlPlane:' "$config" && control_plane=true
  join_preflight "$control_plane" || return 1
  api_up || fail "couldn't validate the identity of the API Server: connection refused" || return 1
  countdown join-failures && { fail "etcd is busy adding another member (injected)"; return 1; }
  if [ "$control_plane" = true ]; then
    download_certs "$config" || return 1
    [ -f "$K/pki/ca.key" ] || fail "[control-plane-prepare] missing the shared CA (no certificateKey)" || return 1
    # The API server's static pod names its EncryptionConfiguration; without the file it never starts.
    [ -f "$K/gpucluster/encryption-configuration.yaml" ] ||
      fail "kube-apiserver: open /etc/kubernetes/gpucluster/encryption-configuration.yaml: no such file" || return 1
    write "$K/pki/apiserver.crt"
    write "$K/admin.conf"
    write "$K/manifests/kube-apiserver.yaml"
    write "$K/manifests/kube-controller-manager.yaml"
    write "$K/manifests/kube-scheduler.yaml"
    phase_point fail-join-at control-plane-prepare || return 1
  fi
  [ -f "$K/pki/ca.crt" ] || write "$K/pki/ca.crt"
  write "$K/bootstrap-kubelet.conf"
  write "$R/var/lib/kubelet/config.yaml"
  phase_point fail-join-at tls-bootstrap || return 1
  write "$K/kubelet.conf"
  rm -f "$K/bootstrap-kubelet.conf"
  if [ "$control_plane" = true ]; then
    phase_point fail-join-at control-plane-join || return 1
    etcd_member_add
    printf '%s\n' "mark-control-plane" >>"$SIM/cluster-state"
  fi
  printf '%s\n' "joined" >>"$SIM/joins"
}

kubeadm_reset() {
  [ -e "$K/kubelet.conf" ] && touch "$SIM/reset-on-joined-node"
  any "$R/var/lib/etcd"/* && touch "$SIM/reset-wiped-etcd"
  rm -rf "${K:?}/manifests/"* "${K:?}/pki/"* "$R/var/lib/etcd/"* "$R/var/lib/kubelet/"*
  rm -f "$K"/{admin,super-admin,kubelet,bootstrap-kubelet,controller-manager,scheduler}.conf
}

run_kubeadm() {
  local config
  config=$(config_arg "$@")
  case "$1 ${2:-}" in
    "config images") [ -f "$config" ] || fail "config file $config not found" ;;
    "init phase")
      [ -f "$config" ] || fail "config file $config not found" || return 1
      init_phase "$3"
      ;;
    "init --config"*) kubeadm_init ;;
    "join phase")
      [ "${3:-}" = control-plane-join ] || fail "unexpected join phase $3" || return 1
      [ -f "$K/kubelet.conf" ] || fail "[control-plane-join] the kubelet has not joined" || return 1
      api_up || fail "[control-plane-join] unable to reach the API server" || return 1
      etcd_member_add
      printf '%s\n' "mark-control-plane" >>"$SIM/cluster-state"
      ;;
    "join --config"*)
      [ -f "$config" ] || fail "config file $config not found" || return 1
      kubeadm_join "$config"
      ;;
    "reset --force") kubeadm_reset ;;
    *) fail "unexpected kubeadm call: $*" ;;
  esac
}

# --- the others -------------------------------------------------------------------------------
run_kubectl() {
  [ "$1" = --kubeconfig ] && [ -f "$2" ] || fail "no kubeconfig: $*" || return 1
  api_up || fail "The connection to the server was refused" || return 1
  countdown kubectl-failures && { fail "error from server (injected)"; return 1; }
  if [ "$3" = apply ]; then
    printf '%s\n' "${*: -1}" >>"$SIM/applied"
  fi
  return 0
}

# curl [OPTIONS] URL. The node's own endpoint ($GPUCLUSTER_API_ENDPOINT) answers once $SIM/api-up
# exists. Any other host:port is another control-plane node, in the state $SIM/peer-<host:port>
# holds: absent (nothing listens: connection refused, exit 7), "ready" (HTTP 200), "unready"
# (HTTP 500, as /readyz of an API server whose etcd is not ready), "unauthorized" (HTTP 401:
# anonymous requests refused) or "hangs" (packets dropped). Like the real curl: an HTTP error is
# exit 0 unless --fail (-f) asks for 22; -w '%{http_code}' prints the status (000 without one);
# a hanging peer holds curl until --connect-timeout or --max-time ends it (exit 28), and without
# either it hangs on (curl's connect timeout is 300 s, its total time unlimited).
curl_fails_on_http_errors() {  # --fail, or -f in a cluster of short options (-ksf)
  local arg
  for arg in "$@"; do
    case $arg in
      --fail) return 0 ;;
      --*) ;;
      -*f*) return 0 ;;
    esac
  done
  return 1
}

curl_http_status() {  # curl_http_status CODE ARGS...: what curl does with an HTTP answer CODE
  local code=$1
  shift
  has_arg -w "$@" && printf '%s' "$code"
  if [ "$code" -ge 400 ] && curl_fails_on_http_errors "$@"; then
    return 22
  fi
  return 0
}

curl_peer() {
  local peer=$1 state="" fd
  shift
  [ -f "$SIM/peer-$peer" ] && read -r state <"$SIM/peer-$peer"
  case $state in
    ready) curl_http_status 200 "$@" ;;
    unready) curl_http_status 500 "$@" ;;
    unauthorized) curl_http_status 401 "$@" ;;
    hangs)
      if has_arg --connect-timeout "$@" || has_arg --max-time "$@" || has_arg -m "$@"; then
        has_arg -w "$@" && printf '000'
        return 28
      fi
      printf '%s\n' "curl to $peer without a timeout: hangs" >>"$SIM/failures"
      exec {fd}<> <(:)
      read -r -t 3600 -u "$fd" _
      return 28
      ;;
    *)
      has_arg -w "$@" && printf '000'
      return 7
      ;;
  esac
}

# The pinned Calico manifest: served from $SIM/calico-manifest (the harness puts the vendored copy
# there; a test may put other bytes) to curl's -o file; HTTP 404 (exit 22 with -f) when absent.
curl_manifest() {
  local out="" previous=""
  for arg in "$@"; do
    [ "$previous" = -o ] && out=$arg
    previous=$arg
  done
  printf '%s\n' "${*: -1}" >>"$SIM/fetched"
  [ -f "$SIM/calico-manifest" ] || return 22
  cp "$SIM/calico-manifest" "$out"
}

# GET of a Secret from the node's endpoint, as kube-apiserver answers it: TLS verified against
# --cacert ($SIM/cluster-ca.crt is the CA the API server's certificate chains to; else exit 60),
# the bearer token of the -H @FILE header must be $SIM/control-plane-join-token (else 401), the
# Secret $SIM/secret-NAME.json must exist (else 404: never written, or gone with its token).
curl_secret() {
  local name=${1##*/} out="" cacert="" header="" previous="" arg token
  shift
  for arg in "$@"; do
    case $previous in
      -o) out=$arg ;;
      --cacert) cacert=$arg ;;
      -H) header=${arg#@} ;;
    esac
    previous=$arg
  done
  printf '%s\n' "GET secret $name" >>"$SIM/api-requests"
  api_up || return 7
  [ -n "$cacert" ] && cmp -s "$cacert" "$SIM/cluster-ca.crt" || return 60
  token=$(sed -n 's/^Authorization: Bearer //p' "$header" 2>/dev/null)
  if [ -z "$token" ] || [ "$token" != "$(cat "$SIM/control-plane-join-token" 2>/dev/null)" ]; then
    curl_http_status 401 "$@"
    return
  fi
  [ -f "$SIM/secret-$name.json" ] || {
    curl_http_status 404 "$@"
    return
  }
  cp "$SIM/secret-$name.json" "$out"
}

run_curl() {
  local url=${*: -1} target
  case "$url" in
    *tigera-operator.yaml) curl_manifest "$@"; return ;;
    */api/v1/namespaces/kube-system/secrets/*) curl_secret "$url" "$@"; return ;;
  esac
  target=${url#https://}
  target=${target%%/*}
  if [ "$target" != "${GPUCLUSTER_API_ENDPOINT:-}" ]; then
    curl_peer "$target" "$@"
    return
  fi
  api_up && return 0
  # A control plane on this node: the kubelet runs its static pods, and the API server answers.
  if [ -f "$K/manifests/kube-apiserver.yaml" ] && [ -f "$K/manifests/etcd.yaml" ] && kubelet_configured; then
    touch "$SIM/api-up"
    return 0
  fi
  countdown api-late && return 22
  if [ -f "$SIM/api-late" ]; then
    touch "$SIM/api-up"  # the countdown reached zero: the API server answers from now on
    return 0
  fi
  return 22
}

run_modprobe() {
  case $1 in
    overlay | br_netfilter) ;;
    ib_umad) [ -f "$SIM/pvrdma-present" ] && write "$R/dev/infiniband/umad0" ;;
    ib_uverbs) [ -f "$SIM/pvrdma-present" ] && write "$R/dev/infiniband/uverbs0" ;;
    rdma_ucm) write "$R/dev/infiniband/rdma_cm" ;;
    *) fail "modprobe: FATAL: Module $1 not found" ;;
  esac
  return 0
}

# rdma dev set DEV name NEWNAME (iproute2 rdma-dev(8)): the kernel renames the device, so its
# sysfs entry; an unknown DEV or a NEWNAME in use is refused, as the kernel refuses it.
# $SIM/rdma-rename-refused holds the kernel's answer to a rename it refuses (ib_device_rename
# returns -EBUSY or -EPERM, which iproute2's rdma prints as "error: ..." and exits 1): a refusal
# of the real tool, so not recorded as the script's failure.
run_rdma() {
  local class=$R/sys/class/infiniband refused=""
  [ "$1 $2 ${4:-}" = "dev set name" ] && [ -n "${5:-}" ] || fail "unexpected: rdma $*" || return 1
  [ -f "$SIM/rdma-rename-refused" ] && read -r refused <"$SIM/rdma-rename-refused"
  if [ -n "$refused" ]; then
    echo "error: $refused" >&2
    return 1
  fi
  [ -e "$class/$3" ] || fail "Wrong device name $3" || return 1
  [ ! -e "$class/$5" ] || fail "error: File exists" || return 1
  PATH=/usr/bin:/bin mv "$class/$3" "$class/$5"
}

run_containerd() {
  local config entry file
  if [ "$*" = --version ]; then
    # As Docker's containerd.io prints it (containerd cmd/containerd/command/main.go: name,
    # package, version, revision); $SIM/containerd-version sets the version, default 2.3.1.
    echo "containerd containerd.io $(cat "$SIM/containerd-version" 2>/dev/null || echo 2.3.1) 0123456789abcdef"
    return 0
  fi
  [ "$1" = --config ] && [ "$3 $4" = "config dump" ] || fail "unexpected: containerd $*" || return 1
  config=$2
  [ -f "$config" ] || fail "containerd: $config: no such file" || return 1
  cat "$config"
  # Every entry of a one-line `imports = ["a", "b"]`, globs expanded, as containerd merges them.
  # shellcheck disable=SC2013 # words, not lines: each entry is one word, a glob to expand
  for entry in $(sed -n '/^imports = \[/{s/^imports = \[\(.*\)\]$/\1/;s/[",]/ /g;p}' "$config"); do
    for file in $entry; do
      [ -f "$file" ] && cat "$file"
    done
  done
  return 0
}

cri_section() {  # cri_section CONFIG: the CRI plugin's tables of `containerd config dump`
  local line keep=false
  while IFS= read -r line; do
    if [[ $line =~ ^[[:space:]]*\[ ]]; then
      keep=false
      [[ $line =~ ^[[:space:]]*\[plugins\.[\"\'](io\.containerd\.grpc\.v1\.cri|io\.containerd\.cri\.v1\.runtime)[\"\'] ]] && keep=true
    fi
    [ "$keep" = true ] && printf '%s\n' "$line"
  done < <(if [ -f "$SIM/nvidia-ctk-from-defaults" ]; then containerd config default; else containerd --config "$1" config dump; fi)
}

# `nvidia-ctk config [--config-file=F] --in-place --set KEY=VALUE...` (cmd/nvidia-ctk/config/
# config.go): the top-level keys of the toolkit's config.toml set, the rest kept; a key the
# toolkit does not know is refused; without --in-place it writes to stdout only.
# $SIM/nvidia-ctk-config-ignores-set: a toolkit whose write did not take.
nvidia_ctk_config() {
  local file=/etc/nvidia-container-runtime/config.toml in_place=false arg key value
  local -a sets=()
  while [ $# -gt 0 ]; do
    case $1 in
      --config-file=* | --config=*) file=${1#*=} ;;
      --in-place | -i) in_place=true ;;
      --set) sets+=("$2"); shift ;;
      --set=*) sets+=("${1#--set=}") ;;
      *) fail "nvidia-ctk config: unexpected argument $1" || return 1 ;;
    esac
    shift
  done
  [ "$in_place" = true ] || fail "nvidia-ctk config without --in-place writes to stdout only" || return 1
  [ -f "$SIM/nvidia-ctk-config-ignores-set" ] && return 0
  [ -f "$file" ] || : >"$file"
  for arg in "${sets[@]}"; do
    key=${arg%%=*} value=${arg#*=}
    case $key in
      accept-nvidia-visible-devices-envvar-when-unprivileged | accept-nvidia-visible-devices-as-volume-mounts) ;;
      *) fail "nvidia-ctk config: invalid config option: undefined field \"$key\"" || return 1 ;;
    esac
    if grep -q "^$key = " "$file"; then
      sed -i "s|^$key = .*|$key = $value|" "$file"
    else
      # Top-level keys go before the first table, or TOML puts them inside it.
      sed -i "1i $key = $value" "$file" 2>/dev/null
      [ -s "$file" ] || echo "$key = $value" >"$file"
    fi
  done
}

run_nvidia_ctk() {
  local config="" runtime_name="" source=file arg table drop_in base=""
  if [ "$*" = --version ]; then
    # As the real CLI prints it (urfave/cli's version flag): the version, then the commit.
    echo "NVIDIA Container Toolkit CLI version $(cat "$SIM/nvidia-ctk-version" 2>/dev/null || echo 1.18.0)"
    echo "commit: 0000000000000000000000000000000000000000"
    return 0
  fi
  if [ "$1" = config ]; then
    nvidia_ctk_config "${@:2}"
    return
  fi
  [ "$1 $2" = "runtime configure" ] || fail "unexpected: nvidia-ctk $*" || return 1
  if has_arg --help "$@"; then
    [ -f "$SIM/nvidia-ctk-without-config-source" ] || echo "   --config-source value  the source to retrieve the container runtime configuration; one of [command, file]"
    return 0
  fi
  for arg in "$@"; do
    case $arg in
      --config=*) config=${arg#--config=} ;;
      --config-source=*) source=${arg#--config-source=} ;;
      --nvidia-runtime-name=*) runtime_name=${arg#--nvidia-runtime-name=} ;;
      --set-as-default | --nvidia-set-as-default) touch "$SIM/nvidia-set-as-default" ;;
    esac
  done
  has_arg --runtime=containerd "$@" || fail "not --runtime=containerd" || return 1
  config=${config:-/etc/containerd/config.toml}
  runtime_name=${runtime_name:-nvidia}
  if grep -q '^version = 3' "$config"; then
    table="plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.$runtime_name"
  else
    table="plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.$runtime_name"
  fi
  # With `--config-source=command` it starts from `containerd config dump` and its drop-in carries
  # the whole CRI section; from the file it carries only what it changed (config_drop_in.go).
  # $SIM/nvidia-ctk-from-defaults: a toolkit that builds its drop-in's CRI section from containerd's
  # defaults instead of the running configuration (the template's sandbox image and SystemdCgroup lost).
  if [ "$source" = command ] || [ -f "$SIM/nvidia-ctk-from-defaults" ]; then
    base=$(cri_section "$config")
  fi
  # What nvidia-ctk >= 1.18 does: a drop-in with the runtime, imported from the main config.
  drop_in=$R/etc/containerd/conf.d/99-nvidia.toml
  write "$drop_in" "$base
[$table]
  runtime_type = \"io.containerd.runc.v2\"
[$table.options]
  BinaryName = \"/usr/bin/nvidia-container-runtime\"
  SystemdCgroup = true"
  # Its directory joins the main config's `imports`, appended to what is there (nvidia-container-
  # toolkit pkg/config/engine/containerd/config_drop_in.go, `ensureImports`); the real
  # `containerd config default` already has `imports = []`.
  local pattern="$R/etc/containerd/conf.d/*.toml"
  if ! grep -q '^imports' "$config"; then
    sed -i "1a imports = [\"$pattern\"]" "$config"
  elif grep -q '^imports = \[\]$' "$config"; then
    sed -i "s|^imports = \[\]\$|imports = [\"$pattern\"]|" "$config"
  elif ! grep -qF "\"$pattern\"" "$config"; then
    sed -i "/^imports = \[/s|\]\$|, \"$pattern\"]|" "$config"
  fi
}

# vmware-rpctool "info-get guestinfo.KEY" | "info-set guestinfo.KEY VALUE": the VM's guestinfo,
# as files under $SIM/guestinfo (what vCenter shows as the VM's extraConfig). Like the real one,
# info-get of a key the VM lacks prints "No value found" and fails. The stack is there too: once
# the test made it deliver ($SIM/pki-bundle), the init node's envelope is the answer to its
# request (pki_responder.py, the program's sealing code), written as InitPkiDelivery writes it.
run_vmware_rpctool() {
  local command=$1 verb key value store=$SIM/guestinfo
  verb=${command%% *}
  mkdir -p "$store"
  case $verb in
    info-get)
      key=${command#info-get }
      if [ "$key" = guestinfo.gpucluster.pki.envelope ] && [ -f "$SIM/pki-bundle" ] &&
        [ -f "$store/guestinfo.gpucluster.pki.request" ] && [ ! -f "$SIM/withhold-pki" ] &&
        ! one_shot fail-delivery once; then
        "${GPUCLUSTER_TEST_PYTHON:?}" -m tests.components.k8s.node_bootstrap.pki_responder "$SIM" || return 1
      fi
      [ -f "$store/$key" ] || {
        echo "No value found" >&2
        return 1
      }
      cat "$store/$key"
      echo
      ;;
    info-set)
      key=${command#info-set }
      value=${key#* }
      key=${key%% *}
      printf '%s' "$value" >"$store/$key"
      ;;
    *) fail "vmware-rpctool: unexpected command: $command" ;;
  esac
}

status=0
case $name in
  kubeadm) run_kubeadm "$@" || status=1 ;;
  kubectl) run_kubectl "$@" || status=1 ;;
  curl) run_curl "$@" || status=$? ;;
  modprobe) run_modprobe "$@" || status=1 ;;
  rdma) run_rdma "$@" || status=1 ;;
  sysctl)
    if [ "$1" != -p ] || [ ! -f "$2" ]; then
      fail "sysctl: cannot open $2"
      status=1
    fi
    ;;
  containerd) run_containerd "$@" || status=1 ;;
  nvidia-ctk) run_nvidia_ctk "$@" || status=1 ;;
  nvidia-smi) echo "GPU 0: GRID T4-16C (UUID: GPU-00000000-0000-0000-0000-000000000000)" ;;
  systemctl)
    case "$1 ${2:-}" in
      "is-active --quiet") status=3 ;;
      "restart containerd") touch "$SIM/containerd-restarted" ;;
    esac
    ;;
  swapoff | sleep) ;;
  vmware-rpctool) run_vmware_rpctool "$@" || status=1 ;;
  update-ca-trust) [ "$*" = extract ] || fail "update-ca-trust: unexpected arguments: $*" || status=1 ;;
  dnf | yum | apt-get | rpm) fail "the bootstrap must not install packages: $name $*" || status=1 ;;
  *) fail "no stand-in for $name" || status=1 ;;
esac

if [ "$count" = "$cut_at" ] && [ "$cut_mode" = after ]; then
  power_cut "$@"
fi
exit "$status"
