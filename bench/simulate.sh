#!/bin/sh
# Wall time of `trainyard simulate` on the Philly and Alibaba traces: three runs per case, median shown.
# Usage: bench/simulate.sh [TRAINYARD_BIN] [TRACES_DIR]
# TRACES_DIR (or $TRAINYARD_TRACES) holds philly.csv and alibaba_fgd2023.csv in the normalized
# trace CSV of docs/simulate.md ("Traces").
set -eu
case ${1:-} in -h|--help)
  echo "usage: bench/simulate.sh [TRAINYARD_BIN] [TRACES_DIR]   (defaults build/trainyard ../shared/traces)"
  echo "Wall time of trainyard simulate on the Philly and Alibaba traces: three runs per case, median shown."
  exit 0;;
esac
BIN=${1:-build/trainyard}
case ${1:-} in -h|--help) sed -n '2,5s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
TRACES=${2:-${TRAINYARD_TRACES:?set TRAINYARD_TRACES (or pass TRACES_DIR) to a directory with philly.csv and alibaba_fgd2023.csv in the normalized trace CSV of docs/simulate.md}}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
run() {  # name trace cluster [extra flags]
  name=$1 trace=$2 cluster=$3
  shift 3
  times=""
  for i in 1 2 3; do
    t=$({ "$BIN" simulate --trace "$trace" --cluster "$cluster" --out "$OUT/$name" "$@" >/dev/null; } 2>&1 |
        sed -n 's/^wall time \([0-9.]*\) s$/\1/p')
    times="$times $t"
  done
  median=$(printf '%s\n' $times | sort -n | sed -n 2p)
  util=$(sed -n 's/^  "gpu_utilization": \(.*\),$/\1/p' "$OUT/$name/summary.json")
  jobs=$(sed -n 's/^  "jobs": \(.*\),$/\1/p' "$OUT/$name/summary.json")
  pre=$(sed -n 's/^  "preemptions": \(.*\),$/\1/p' "$OUT/$name/summary.json")
  echo "$name: jobs $jobs, utilization $util, preemptions $pre, wall s:$times -> median $median"
}
run philly_fifo "$TRACES/philly.csv" examples/simulate/philly_fifo.toml
run philly_fair_share "$TRACES/philly.csv" examples/simulate/philly_fair_share.toml
run philly_quota "$TRACES/philly.csv" examples/simulate/philly_quota.toml
run alibaba_fifo "$TRACES/alibaba_fgd2023.csv" examples/simulate/alibaba_fifo.toml
run alibaba_fifo_steady "$TRACES/alibaba_fgd2023.csv" examples/simulate/alibaba_fifo.toml --start 9936000
