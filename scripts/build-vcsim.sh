#!/usr/bin/env bash
# Build the vCenter simulator harness (vcsim/main.go) into build/vcsim-harness.
#
# Uses Debian's Go toolchain and govmomi sources in GOPATH mode, no network:
#   apt-get install -y golang-go golang-github-vmware-govmomi-dev
# Idempotent: rebuilds only when vcsim/*.go is newer than the binary (or with --force).
# Takes about 20 s cold (Go build cache empty), about 1 s warm.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${root}/build/vcsim-harness"
gopath="${VCSIM_GOPATH:-/usr/share/gocode}"

if [[ "${1:-}" != "--force" && -x "${out}" ]]; then
  newer="$(find "${root}/vcsim" -name '*.go' -newer "${out}" | head -n 1)"
  if [[ -z "${newer}" ]]; then
    echo "build-vcsim: ${out} is up to date"
    exit 0
  fi
fi

if ! command -v go >/dev/null 2>&1; then
  echo "build-vcsim: 'go' not found; install golang-go (Debian) or Go >= 1.19" >&2
  exit 2
fi
if [[ ! -d "${gopath}/src/github.com/vmware/govmomi/simulator" ]]; then
  echo "build-vcsim: govmomi sources not found under ${gopath}/src;" \
       "install golang-github-vmware-govmomi-dev or set VCSIM_GOPATH" >&2
  exit 2
fi

mkdir -p "${root}/build"
# GOPATH mode resolves github.com/vmware/govmomi from the Debian source tree;
# the harness itself builds as a directory outside GOPATH, which GOPATH mode allows.
# A private build cache keeps it working where $HOME is read-only.
export GOCACHE="${GOCACHE:-${root}/build/.gocache}"
cd "${root}"
tmp="${out}.tmp.$$"
trap 'rm -f "${tmp}"' EXIT
# CGO off: a static binary that can be copied to another Linux machine.
CGO_ENABLED=0 GO111MODULE=off GOPATH="${gopath}" GOFLAGS= go build -o "${tmp}" ./vcsim
mv -f "${tmp}" "${out}"
echo "build-vcsim: built ${out}"
