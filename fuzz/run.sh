#!/usr/bin/env bash
# Runs every libFuzzer target built in BUILD (default build-fuzz; see `make fuzz`) for SECONDS
# (default 20) over a scratch copy of its corpus in fuzz/corpus/<name>/, then replays every input
# in fuzz/regressions/<name>/. Fails on any crash, sanitizer report, leak, input slower than 10 s
# or run above 2 GB RSS. A failing input is kept under BUILD/fuzz-artifacts/ (docs/fuzzing.md says
# how it becomes a regression). Usage: fuzz/run.sh [BUILD] [SECONDS] [TARGET...]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build-fuzz}" && pwd)
seconds=${2:-20}
shift $(( $# < 2 ? $# : 2 ))

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for bin in "$build"/fuzz/*_fuzz; do targets+=("$(basename "$bin" _fuzz)"); done
fi

artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

limits=(-timeout=10 -rss_limit_mb=2048)
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

failed=()
for name in "${targets[@]}"; do
  bin="$build/fuzz/${name}_fuzz"
  echo "== fuzz $name: ${seconds}s over fuzz/corpus/$name"
  mkdir "$scratch/$name"
  cp "$here/corpus/$name"/* "$scratch/$name/"
  if ! "$bin" "${limits[@]}" -max_total_time="$seconds" -print_final_stats=1 \
       -artifact_prefix="$artifacts/$name-" "$scratch/$name" > "$scratch/$name.log" 2>&1; then
    tail -n 60 "$scratch/$name.log"
    failed+=("$name")
    continue
  fi
  grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|INFO: Loaded|#[0-9]+ +DONE)' "$scratch/$name.log" || true

  regressions=()
  if [ -d "$here/regressions/$name" ]; then
    while IFS= read -r -d '' f; do regressions+=("$f"); done \
      < <(find "$here/regressions/$name" -type f ! -name README.md -print0 | sort -z)
  fi
  if [ ${#regressions[@]} -gt 0 ]; then
    echo "== replay $name: ${#regressions[@]} inputs from fuzz/regressions/$name"
    if ! "$bin" "${limits[@]}" "${regressions[@]}" > "$scratch/$name.replay.log" 2>&1; then
      tail -n 60 "$scratch/$name.replay.log"
      failed+=("$name (regressions)")
    fi
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs kept in $artifacts)" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${seconds}s each: no crash"
