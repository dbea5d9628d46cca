#!/usr/bin/env bash
# Serve, on 127.0.0.1, a vCenter simulator with exactly the inventory a stack file names (default
# the `sim` stack, Pulumi.sim.yaml), print its address, the VSPHERE_* variables and the preflight
# command, and run until Ctrl-C. Then, in another shell:
#   VSPHERE_PASSWORD=pass python -m stacks preflight sim
# Arguments go to `python -m stacks.tools.simulator` (STACK, --file FILE, --port N; 0: any free port).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
# Rebuilds only when vcsim/*.go changed; without Go an existing harness still serves.
if command -v go >/dev/null 2>&1; then
  bash scripts/build-vcsim.sh >&2
elif [[ ! -x build/vcsim-harness ]]; then
  echo "simulator: build/vcsim-harness is missing and Go is not installed;" \
       "apt-get install golang-go golang-github-vmware-govmomi-dev, then run this again" >&2
  exit 2
fi
python="${root}/.venv/bin/python"
if [[ ! -x "${python}" ]]; then
  echo "simulator: ${python} is missing; run scripts/setup.sh first" >&2
  exit 2
fi
# exec: Ctrl-C and SIGTERM reach the Python runner, which stops the harness.
exec "${python}" -m stacks.tools.simulator "$@"
