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

# One target: fuzz, then replay its regressions; its output goes to $scratch/$name.out and a
# failure is recorded as $scratch/$name.failed (read after every target is done).
fuzz_one() {
  local name=$1 bin="$build/fuzz/${1}_fuzz"
  exec > "$scratch/$name.out" 2>&1
  echo "== fuzz $name: ${seconds}s over fuzz/corpus/$name"
  mkdir "$scratch/$name"
  cp "$here/corpus/$name"/* "$scratch/$name/"
  if ! "$bin" "${limits[@]}" -max_total_time="$seconds" -print_final_stats=1 \
       -artifact_prefix="$artifacts/$name-" "$scratch/$name" > "$scratch/$name.log" 2>&1; then
    tail -n 60 "$scratch/$name.log"
    echo "$name" > "$scratch/$name.failed"
    return
  fi
  grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|INFO: Loaded|#[0-9]+ +DONE)' "$scratch/$name.log" || true

  local regressions=()
  if [ -d "$here/regressions/$name" ]; then
    while IFS= read -r -d '' f; do regressions+=("$f"); done \
      < <(find "$here/regressions/$name" -type f ! -name README.md -print0 | sort -z)
  fi
  if [ ${#regressions[@]} -gt 0 ]; then
    echo "== replay $name: ${#regressions[@]} inputs from fuzz/regressions/$name"
    if ! "$bin" "${limits[@]}" "${regressions[@]}" > "$scratch/$name.replay.log" 2>&1; then
      tail -n 60 "$scratch/$name.replay.log"
      echo "$name (regressions)" > "$scratch/$name.failed"
    fi
  fi
}

# Each libFuzzer process uses one core: FUZZ_JOBS targets at a time (default: every core), so a
# bounded run takes its SECONDS about (targets / cores) times rather than once per target.
parallel=${FUZZ_JOBS:-$(nproc)}
for name in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n || true; done
  fuzz_one "$name" &
done
wait

failed=()
for name in "${targets[@]}"; do
  cat "$scratch/$name.out"
  if [ -f "$scratch/$name.failed" ]; then failed+=("$(cat "$scratch/$name.failed")"); fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs kept in $artifacts)" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${seconds}s each, $parallel at a time: no crash"
