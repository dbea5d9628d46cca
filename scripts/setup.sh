#!/usr/bin/env bash
# Set up a fresh clone: Debian packages for the vCenter simulator, the Python virtualenv that
# Pulumi.yaml names (.venv), and the simulator harness binary. Idempotent; safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_packages=(golang-go golang-github-vmware-govmomi-dev graphviz shellcheck
  etcd-server etcd-client openssh-server cloud-init containerd nftables iproute2
  docker-registry skopeo openssl curl)
# Debian's own python3 needs python3-venv for `python3 -m venv`; other Pythons ship ensurepip.
python3 -c "import ensurepip, venv" 2>/dev/null || apt_packages+=(python3-venv)
if command -v apt-get >/dev/null 2>&1; then
  missing=()
  for pkg in "${apt_packages[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    sudo_cmd=()
    [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    echo "setup: installing ${missing[*]} (the vCenter simulator; Graphviz for plan pictures)"
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
else
  echo "setup: no apt-get here; the simulator tests will use a 'vcsim' binary from PATH (see README)"
fi

echo "setup: the Python virtualenv .venv and requirements-dev.txt (about 2 minutes on a fresh clone; each package is listed as pip fetches it)"
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# Not -q: pip's "Collecting ..." lines are the progress of the longest step. What a re-run already
# has ("Requirement already satisfied") is left out; pip's errors still show.
.venv/bin/python -m pip install --progress-bar off -r requirements-dev.txt 2>&1 |
  sed -u '/^Requirement already satisfied/d'

if command -v go >/dev/null 2>&1 && [ -d /usr/share/gocode/src/github.com/vmware/govmomi ]; then
  echo "setup: building the vCenter simulator harness (build/vcsim-harness)"
  bash scripts/build-vcsim.sh
fi
echo "setup: done (.venv ready)"
