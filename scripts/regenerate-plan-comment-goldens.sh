#!/usr/bin/env bash
# Rewrites the expected Markdown of tests/workflow/plan_comments/ from `plan --format markdown`.
# Only by hand, after reading the diff: tests/workflow/test_plan_comment.py compares and never writes.
set -euo pipefail
cd "$(dirname "$0")/.."
folder=tests/workflow/plan_comments
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for head in "$folder"/*.yaml; do
  case="$(basename "$head" .yaml)"
  [ "$case" = base ] && continue
  # A refused change exits 2 and still prints its Markdown.
  .venv/bin/python -m stacks plan dev --file "$head" --against "$folder/base.yaml" --out "$scratch/$case" \
    --format markdown > "$folder/$case.md" || true
  echo "wrote $folder/$case.md"
done
git diff --stat -- "$folder"
