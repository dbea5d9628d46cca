#!/usr/bin/env bash
# Regenerate the hash-pinned lock files the credential-holding workflow jobs install from
# (`pip install --require-hashes -r requirements.lock`; docs/deploy.md, "Who sees which secret"):
# every package, transitive ones included, pinned to one version and the sha256 of each of its
# files on PyPI, so an index or mirror that serves other bytes fails the install instead of running.
# Run after changing requirements.txt or policy/requirements.txt; tests/workflow/test_locked_installs.py
# fails until the locks agree with them. Needs uv (requirements-dev.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
uv="${UV:-uv}"
# CI runs Linux x86_64 with Python 3.11 (actions/setup-python in the workflows).
target=(--python-version 3.11 --python-platform x86_64-manylinux_2_28)
# The versions the test suite runs with (requirements-dev.txt: the program, the policy pack and the
# tools in one environment) constrain both locks, so a deployment installs what the tests tested
# (pulumi-policy, for one, holds protobuf at 5.29).
tested="$(mktemp)"
trap 'rm -f "$tested"' EXIT
"$uv" pip compile --quiet "${target[@]}" --no-annotate --no-header --output-file "$tested" requirements-dev.txt
lock() {
  "$uv" pip compile --quiet --generate-hashes "${target[@]}" --constraint "$tested" --no-annotate \
    --custom-compile-command "bash scripts/lock-requirements.sh" --output-file "$2" "$1"
}
lock requirements.txt requirements.lock
lock policy/requirements.txt policy/requirements.lock
