#!/usr/bin/env bash
# The project's one test command: lint, type-check, then the whole test suite (simulator tests
# included). Extra arguments go to pytest, e.g. `bash scripts/test.sh -k rules`.
set -euo pipefail
cd "$(dirname "$0")/.."
# The test bench (its Debian packages, requirements-dev.txt) on top of what scripts/setup.sh set up
# for a user; quick when it is there already.
bash scripts/setup.sh --test
export PULUMI_ERROR_OUTPUT_STRING=true  # an Output turned into a string fails loudly
.venv/bin/ruff check .
.venv/bin/mypy
# The node bootstrap's shell, and the stand-in that plays its tools in the tests: any finding fails.
if ! command -v shellcheck >/dev/null 2>&1; then
  echo "test: shellcheck is missing (Debian package shellcheck); run scripts/setup.sh" >&2
  exit 1
fi
shellcheck components/k8s/node_bootstrap/files/*.sh tests/components/k8s/node_bootstrap/standins/*.sh scripts/pick_stacks.sh \
  scripts/regenerate-plan-comment-goldens.sh scripts/up.sh provider/pulumi-resource-gpucluster
# The GitHub workflows: actionlint (requirements-dev.txt) checks syntax, expressions, the shell of
# `run:` steps and refuses actions on a runtime GitHub's runners no longer have; any finding fails.
.venv/bin/actionlint .github/workflows/*.yml
.venv/bin/python -m pytest "$@"
# CI also proves every test file passes on its own (the run above proves "in any order").
if [ "${CI:-}" = true ] && [ "$#" -eq 0 ]; then
  bash scripts/test-files-alone.sh
fi
