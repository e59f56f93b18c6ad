#!/usr/bin/env bash
# DescribeServiceJob latency while submissions commit, for one or more server binaries in turn
# (e.g. a build before and after a change), each against a fresh server with default settings
# (SQLite synchronous=FULL: one fsync per turn). Per binary, REPS rounds of:
#   - readlat: SUBMIT_JOBS submissions from 16 connections, one reader describing a queued job;
#   - latency: submit -> RUNNING of LATENCY_JOBS jobs on idle capacity.
#   bench/readlat.sh [--jobs N] [--latency-jobs N] [--reps R] BIN...
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
gen="$root/build/bench/ty_loadgen"
jobs=5000 lat_jobs=100 reps=1
while [[ $# -gt 0 && "$1" == --* ]]; do
  case "$1" in
    --jobs) jobs="$2"; shift 2 ;;
    --latency-jobs) lat_jobs="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    -h|--help) sed -n '2,7s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[[ $# -ge 1 ]] || { echo "usage: $0 [--jobs N] [--latency-jobs N] [--reps R] BIN..." >&2; exit 2; }

one() {  # one round against a fresh server of binary $1
  local bin="$1" data pid url key secret
  data="$(mktemp -d /tmp/trainyard-readlat-XXXXXX)"
  "$bin" serve --listen 127.0.0.1:0 --data-dir "$data" --log-level warn >"$data/out" 2>"$data/log" &
  pid=$!
  for _ in $(seq 100); do grep -q listening "$data/out" && break; sleep 0.1; done
  url="$(sed -n 's/^listening on //p' "$data/out")"
  key="$(sed -n 's/^aws_access_key_id = //p' "$data/credentials")"
  secret="$(sed -n 's/^aws_secret_access_key = //p' "$data/credentials")"
  ty() { AWS_ACCESS_KEY_ID="$key" AWS_SECRET_ACCESS_KEY="$secret" "$bin" "$@" --endpoint-url "$url" >/dev/null; }
  ty call batch CreateServiceEnvironment '{"serviceEnvironmentName":"parked","serviceEnvironmentType":"SAGEMAKER_TRAINING","state":"DISABLED","capacityLimits":[{"maxCapacity":1,"capacityUnit":"NUM_INSTANCES"}]}'
  ty call batch CreateJobQueue '{"jobQueueName":"parked","jobQueueType":"SAGEMAKER_TRAINING","priority":1,"serviceEnvironmentOrder":[{"order":1,"serviceEnvironment":"parked"}]}'
  ty call batch CreateServiceEnvironment '{"serviceEnvironmentName":"idle","serviceEnvironmentType":"SAGEMAKER_TRAINING","capacityLimits":[{"maxCapacity":1,"capacityUnit":"NUM_INSTANCES"}]}'
  ty call batch CreateJobQueue '{"jobQueueName":"idle","jobQueueType":"SAGEMAKER_TRAINING","priority":1,"serviceEnvironmentOrder":[{"order":1,"serviceEnvironment":"idle"}]}'
  echo "{\"binary\": \"$bin\"}"
  "$gen" readlat --endpoint "$url" --key "$key" --secret "$secret" --queue parked --jobs "$jobs" --connections 16
  "$gen" latency --endpoint "$url" --key "$key" --secret "$secret" --queue idle --jobs "$lat_jobs"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "$data"
}

for _ in $(seq "$reps"); do
  for bin in "$@"; do one "$bin"; done
done
