#!/usr/bin/env bash
# Set up a fresh clone, by role. Idempotent; safe to re-run.
#
#   bash scripts/setup.sh          what a user runs the project with: the virtualenv Pulumi.yaml names
#                                  (.venv: the program, the policy pack, `python -m stacks`), Graphviz
#                                  for plan's pictures, skopeo for `stacks bundle`, and the vCenter
#                                  simulator (Go and govmomi's source, built into build/vcsim-harness)
#   bash scripts/setup.sh --test   the test bench on top: the real programs the tests run (etcd, sshd,
#                                  cloud-init, containerd, a registry, ...; docs/tests.md) and the test
#                                  and lint tools (requirements-dev.txt). scripts/test.sh runs it
#                                  first, so `setup.sh` then `test.sh` (what CI runs) set up everything.
#
# Debian packages come through apt-get (sudo unless root). Without apt-get it installs none: it
# names the programs to install by other means and goes on with the virtualenv (docs/tests.md,
# "Without apt-get"; the README links it).
set -euo pipefail
cd "$(dirname "$0")/.."

role=user
case "${1:-}" in
  "") ;;
  --test) role="test" ;;
  *)
    echo "setup: unknown option '$1': use no option (what a user needs) or --test (the test bench too)" >&2
    exit 2
    ;;
esac

if [ "$role" = user ]; then
  apt_packages=(graphviz skopeo golang-go golang-github-vmware-govmomi-dev)
  why="Graphviz for plan pictures, skopeo for bundle, Go and govmomi for the vCenter simulator"
  requirements="requirements-cli.txt"
  # Debian's own python3 needs python3-venv for `python3 -m venv`; other Pythons ship ensurepip.
  python3 -c "import ensurepip, venv" 2>/dev/null || apt_packages+=(python3-venv)
else
  apt_packages=(shellcheck etcd-server etcd-client openssh-server cloud-init containerd nftables iproute2
    docker-registry skopeo openssl curl)
  why="the real programs the tests run: docs/tests.md"
  requirements="requirements-dev.txt"
fi

if command -v apt-get >/dev/null 2>&1; then
  missing=()
  for pkg in "${apt_packages[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    sudo_cmd=()
    [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    echo "setup: installing ${missing[*]} ($why)"
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
else
  echo "setup: no apt-get here, so no system packages installed; install these by other means if you need them" \
    "(docs/tests.md, \"Without apt-get\"): ${apt_packages[*]}"
fi

if [ "$role" = user ]; then
  echo "setup: the Python virtualenv .venv and $requirements (about 2 minutes on a fresh clone; each package is listed as pip fetches it)"
  python3 -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
else
  if [ ! -x .venv/bin/python ]; then
    echo "setup: .venv is missing: run 'bash scripts/setup.sh' first (the test bench goes on top of it)" >&2
    exit 1
  fi
  echo "setup: the test and lint tools of $requirements into .venv (each package is listed as pip fetches it)"
fi
# Not -q: pip's "Collecting ..." lines are the progress of the longest step. What a re-run already
# has ("Requirement already satisfied") is left out; pip's errors still show.
.venv/bin/python -m pip install --progress-bar off -r "$requirements" 2>&1 |
  sed -u '/^Requirement already satisfied/d'

if [ "$role" = user ]; then
  if command -v go >/dev/null 2>&1 && [ -d /usr/share/gocode/src/github.com/vmware/govmomi ]; then
    echo "setup: building the vCenter simulator harness (build/vcsim-harness)"
    bash scripts/build-vcsim.sh
  else
    echo "setup: no Go with govmomi's source here: the simulator tests and scripts/simulator.sh use a 'vcsim' binary on PATH"
  fi
  echo "setup: done (.venv ready; the test bench: bash scripts/setup.sh --test, which scripts/test.sh runs)"
else
  echo "setup: done (the test bench)"
fi
