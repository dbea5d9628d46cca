#!/usr/bin/env bash
# The stacks a pull request can affect, as a JSON list on stdout (the preview and plan workflows'
# `changes` jobs; tests/workflow/test_workflows.py runs it in a scratch repository).
#   BASE_SHA, HEAD_SHA  the PR's base and head commits (both fetched)
#   INCLUDE_DELETED=1   also stacks whose file the PR deletes (the plan comment says so; a preview
#                       has nothing to run for them)
# A changed Pulumi.<stack>.yaml picks that stack; a change to code every stack runs picks them all.
# `sim` serves the bundled vCenter simulator on 127.0.0.1 (scripts/simulator.sh): no vCenter to
# preview against; its own test runs preflight against the simulator.
set -euo pipefail
changed="$(git diff --name-only "$BASE_SHA...$HEAD_SHA")"
# Stack names come from file names in the PR: keep only plain names, they reach a shell later.
plain='s/^Pulumi\.([a-z0-9][-a-z0-9]*)\.yaml$/\1/p'
# The stacks of the PR's head commit, read from git, not the working tree: plan-comment.yml runs this
# in a checkout of the base branch, with the PR's commits fetched as data only.
all_stacks="$(git ls-tree --name-only "$HEAD_SHA" | sed -nE "$plain" | { grep -vx sim || true; } | sort)"
if grep -Eq '^(components/|stacks/|policy/|__main__\.py$|requirements[^/]*\.(txt|lock)$|Pulumi\.yaml$)' <<<"$changed"; then
  stacks="$all_stacks"
else
  # Only stack files that still exist: a deleted stack file has nothing to preview.
  stacks="$(sed -nE "$plain" <<<"$changed" | grep -Fx -f <(printf '%s\n' "$all_stacks") || true)"
fi
if [ "${INCLUDE_DELETED:-}" = 1 ]; then
  deleted="$(git diff --name-only --diff-filter=D "$BASE_SHA...$HEAD_SHA" | sed -nE "$plain" | { grep -vx sim || true; })"
  stacks="$(printf '%s\n%s\n' "$stacks" "$deleted" | sed '/^$/d' | sort -u)"
fi
# shellcheck disable=SC2086  # one argument per stack name
python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' $stacks
