#!/usr/bin/env bash
# `pulumi up` with the engine settings its estimate assumes (issue 44): the same steps as the
# deploy workflow (.github/workflows/deploy.yml). The stack's `pulumiUp` keys and this run's own
# preview decide `--parallel` and the checkpoints (`python -m stacks deploy-settings`, printed
# with the estimate beside the CLI's defaults); intermediate checkpoints are skipped only for a
# run whose preview shows creates and nothing replaced, updated or deleted.
#
#   bash scripts/up.sh STACK [more pulumi up flags, e.g. --policy-pack policy]
set -euo pipefail
stack="${1:?usage: bash scripts/up.sh STACK [pulumi up flags]}"
shift
cd "$(dirname "$0")/.."
mkdir -p build/deploy
preview="build/deploy/preview-$stack.json"
settings="build/deploy/settings-$stack.txt"
: > "$settings"
pulumi preview --stack "$stack" --json --non-interactive > "$preview"
.venv/bin/python -m stacks deploy-settings "$stack" --preview "$preview" --github-output "$settings"
parallel=$(sed -n 's/^parallel=//p' "$settings")
skip=$(sed -n 's/^skip-checkpoints=//p' "$settings")
if ! PULUMI_SKIP_CHECKPOINTS="$skip" pulumi up --stack "$stack" --parallel "$parallel" "$@"; then
    if [ "$skip" = true ]; then
        echo "pulumi up stopped with its checkpoints skipped: if it was killed before its final save, the state" \
            "is as before the run. Recover first:" \
            "python -m stacks recover $stack --out build/deploy/import.json (docs/deploy.md)" >&2
    fi
    exit 1
fi
