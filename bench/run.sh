#!/usr/bin/env bash
# Runs the server benchmarks against a fresh server and prints/saves the figures.
#   bench/run.sh [SUBMIT_JOBS] [LATENCY_JOBS]
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  echo "usage: bench/run.sh [SUBMIT_JOBS] [LATENCY_JOBS]   (defaults 20000 200)"
  echo
  echo "Starts a fresh server and measures with build/bench/ty_loadgen: durable submit throughput from"
  echo "4 and 16 connections, server memory per queued job, and submit -> RUNNING latency on idle"
  echo "capacity; figures in bench/results/ (bench/README.md). The scheduling pass at depth is"
  echo "bench/pass_scale.py."
  exit 0
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/build/trainyard"
gen="$root/build/bench/ty_loadgen"
jobs="${1:-20000}"
lat_jobs="${2:-200}"
out="$root/bench/results"
mkdir -p "$out"
data="$(mktemp -d /tmp/trainyard-bench-XXXXXX)"
"$bin" serve --listen 127.0.0.1:0 --data-dir "$data" --log-level warn >"$data/out" 2>"$data/log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 100); do grep -q listening "$data/out" && break; sleep 0.1; done
url="$(sed -n 's/^listening on //p' "$data/out")"
key="$(sed -n 's/^aws_access_key_id = //p' "$data/credentials")"
secret="$(sed -n 's/^aws_secret_access_key = //p' "$data/credentials")"
export AWS_ACCESS_KEY_ID="$key" AWS_SECRET_ACCESS_KEY="$secret"
ty() { "$bin" "$@" --endpoint-url "$url" >/dev/null; }
ty call batch CreateServiceEnvironment '{"serviceEnvironmentName":"parked","serviceEnvironmentType":"SAGEMAKER_TRAINING","state":"DISABLED","capacityLimits":[{"maxCapacity":1,"capacityUnit":"NUM_INSTANCES"}]}'
ty call batch CreateJobQueue '{"jobQueueName":"parked","jobQueueType":"SAGEMAKER_TRAINING","priority":1,"serviceEnvironmentOrder":[{"order":1,"serviceEnvironment":"parked"}]}'
ty call batch CreateServiceEnvironment '{"serviceEnvironmentName":"idle","serviceEnvironmentType":"SAGEMAKER_TRAINING","capacityLimits":[{"maxCapacity":1,"capacityUnit":"NUM_INSTANCES"}]}'
ty call batch CreateJobQueue '{"jobQueueName":"idle","jobQueueType":"SAGEMAKER_TRAINING","priority":1,"serviceEnvironmentOrder":[{"order":1,"serviceEnvironment":"idle"}]}'

rss() { awk '/VmRSS/ {print $2}' "/proc/$pid/status"; }
rss_before=$(rss)
jobs_total=$((jobs + jobs / 4))
"$gen" submit --endpoint "$url" --key "$key" --secret "$secret" --queue parked --jobs "$((jobs / 4))" --connections 4 | tee "$out/submit-4.json"
"$gen" submit --endpoint "$url" --key "$key" --secret "$secret" --queue parked --jobs "$jobs" --connections 16 | tee "$out/submit-16.json"
rss_after=$(rss)
python3 - "$rss_before" "$rss_after" "$jobs_total" <<'PY' | tee "$out/memory.json"
import json, sys
before, after, jobs = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
print(json.dumps({"mode": "memory", "queued_jobs": jobs, "rss_before_kib": before, "rss_after_kib": after,
                  "bytes_per_queued_job": round((after - before) * 1024 / jobs)}))
PY
"$gen" latency --endpoint "$url" --key "$key" --secret "$secret" --queue idle --jobs "$lat_jobs" | tee "$out/latency.json"
