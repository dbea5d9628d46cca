#!/usr/bin/env bash
# The project's one test command: lint, type-check, then the whole test suite (simulator tests
# included). Extra arguments go to pytest, e.g. `bash scripts/test.sh -k rules`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PULUMI_ERROR_OUTPUT_STRING=true  # an Output turned into a string fails loudly
.venv/bin/ruff check .
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
