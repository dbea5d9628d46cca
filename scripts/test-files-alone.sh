#!/usr/bin/env bash
# Every test file on its own, each in a pytest process of its own (random order inside it, as
# pyproject's addopts say): a file that passes only after another file left the simulator or a
# module in a lucky state fails here. scripts/test.sh runs it under CI=true (the whole suite's
# random-order run cannot prove "alone": it seldom puts a given file first). Arguments: the
# folders to search (default tests), e.g. `bash scripts/test-files-alone.sh tests/components/vsphere`.
set -euo pipefail
cd "$(dirname "$0")/.."
roots=("$@")
[ "${#roots[@]}" -gt 0 ] || roots=(tests)
failed=()
while IFS= read -r file; do
  log="${TMPDIR:-/tmp}/test-alone.log"
  # A seed of our own: `-q` hides the line where pytest-random-order prints the one it picked.
  seed="$(( (RANDOM << 15 | RANDOM) % 1000000 ))"
  if .venv/bin/python -m pytest "$file" -q -p no:cacheprovider --random-order-seed="$seed" >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
  fi
  # One line per file: its verdict, the seed of its order (to repeat it) and pytest's summary.
  echo "$status $file --random-order-seed=$seed $(tail -n 1 "$log")"
  if [ "$status" = FAILED ]; then
    tail -n 40 "$log" >&2
    failed+=("$file")
  fi
done < <(find "${roots[@]}" -name 'test_*.py' -type f | sort)
if [ "${#failed[@]}" -gt 0 ]; then
  printf 'test-files-alone: failed alone: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "test-files-alone: every test file passed on its own"
