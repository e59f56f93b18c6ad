#!/bin/sh
# Regenerates every number and plot of docs/experiments/philly.md: runs the Philly trace through
# `trainyard simulate` with each set-up, keeps summary.json and the SVG plots under
# docs/experiments/philly/NAME/ (jobs.csv stays in a temporary directory) and prints the tables.
# Usage (from the repository root): docs/experiments/run.sh [TRAINYARD_BIN] [TRACES_DIR]
# TRACES_DIR (or $TRAINYARD_TRACES) holds philly.csv in the normalized trace CSV of docs/simulate.md.
set -eu
BIN=${1:-build/trainyard}
case ${1:-} in -h|--help) sed -n '2,6s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
TRACES=${2:-${TRAINYARD_TRACES:?set TRAINYARD_TRACES (or pass TRACES_DIR) to a directory with philly.csv and alibaba_fgd2023.csv in the normalized trace CSV of docs/simulate.md}}
DEST=docs/experiments/philly
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# The quotas of the cluster files come from the trace; fail if they no longer match it.
python3 docs/experiments/philly_quotas.py "$TRACES/philly.csv" 512 > "$TMP/quotas.txt"
while read -r share gpus _; do
  grep -A1 "^\[shares.$share\]" examples/simulate/philly_static.toml | grep -qx "gpus = $gpus" ||
    { echo "examples/simulate/philly_static.toml: share $share should have $gpus GPUs" >&2; exit 1; }
done < "$TMP/quotas.txt"
for setup in a_fifo:philly_fifo_strict a_fifo_backfill:philly_fifo b_static:philly_static \
             c_quota:philly_quota_demand d_fair_share:philly_fair_share_demand; do
  name=${setup%%:*} cluster=examples/simulate/${setup#*:}.toml
  "$BIN" simulate --trace "$TRACES/philly.csv" --cluster "$cluster" --out "$TMP/$name"
  mkdir -p "$DEST/$name"
  cp "$TMP/$name/summary.json" "$TMP/$name"/*.svg "$DEST/$name/"
done
python3 docs/experiments/tables.py "$TMP" "$TMP/quotas.txt" a_fifo a_fifo_backfill b_static c_quota d_fair_share
