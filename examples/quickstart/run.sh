#!/usr/bin/env bash
# The quick-start walkthrough: starts a trainyard server with its embedded defaults (SQLite
# state, local executor), creates a service environment and a FIFO job queue, submits three
# training jobs through SubmitServiceJob, follows them to SUCCEEDED, shows each job's model
# artifact and parsed metric, then repeats the exercise from boto3 and from the aws CLI, and
# trains through the trainyard SDK (examples/sdk/run_sdk.py).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${TRAINYARD_BIN:-$root/build/trainyard}"
data="${QUICKSTART_DATA_DIR:-$root/build/quickstart-data}"
rm -rf "$data"
mkdir -p "$data"

echo "== starting trainyard (data in $data)"
"$bin" serve --listen 127.0.0.1:0 --data-dir "$data" >"$data/server.out" 2>"$data/server.log" &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  grep -q '^listening on' "$data/server.out" 2>/dev/null && break
  sleep 0.1
done
endpoint="$(sed -n 's/^listening on //p' "$data/server.out")"
[ -n "$endpoint" ] || { echo "server did not start:"; cat "$data/server.log"; exit 1; }
echo "   $endpoint (web console: $endpoint/console/, sign in with the key in $data/credentials)"
export TRAINYARD_ENDPOINT_URL="$endpoint" TRAINYARD_DATA_DIR="$data"
ty() { "$bin" "$@"; }

echo "== staging code and data in the embedded object store (bucket 'quickstart' = $data/buckets/quickstart)"
mkdir -p "$data/buckets/quickstart/code" "$data/buckets/quickstart/data/train"
tar -czf "$data/buckets/quickstart/code/sourcedir.tar.gz" -C "$here/code" .
python3 "$here/make_data.py" "$data/buckets/quickstart/data/train/train.csv"

echo "== creating a service environment and a FIFO job queue"
ty call batch CreateServiceEnvironment "file://$here/service-environment.json"
ty call batch CreateJobQueue "file://$here/job-queue.json"

echo "== submitting three training jobs"
ids=()
for n in 1 2 3; do
  payload="$(sed -e "s/JOBNUM/$n/" -e "s/EPOCHS/$((10 * n))/" "$here/training-job.json")"
  id="$(ty submit --queue quickstart-queue --name "quickstart-$n" --payload "$payload")"
  echo "   quickstart-$n -> $id"
  ids+=("$id")
done

echo "== following the jobs (SUBMITTED -> RUNNABLE -> SCHEDULED -> STARTING -> RUNNING -> SUCCEEDED)"
ty wait "${ids[@]}"
ty jobs --queue quickstart-queue

echo "== results"
for n in 1 2 3; do
  ty describe "quickstart-$n" | grep -E '^(training job|status|model|metric)'
  tar -tzf "$data/buckets/quickstart/output/quickstart-$n/output/model.tar.gz" | sed 's/^/   artifact: /'
done
echo "== the log of quickstart-1 (last lines)"
ty logs quickstart-1 | tail -n 3

echo "== the events quickstart-1 made (as EventBridge would carry them; 'trainyard events -f' follows them)"
ty events --detail-type 'Batch Service Job State Change' | grep -w quickstart-1

export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_DEFAULT_REGION=us-east-1
AWS_ACCESS_KEY_ID="$(sed -n 's/^aws_access_key_id = //p' "$data/credentials")"
AWS_SECRET_ACCESS_KEY="$(sed -n 's/^aws_secret_access_key = //p' "$data/credentials")"

echo "== the same from boto3"
python3 "$here/walkthrough_boto3.py" --endpoint-url "$endpoint" --bucket-dir "$data/buckets"

echo "== and from the aws CLI"
if command -v aws >/dev/null 2>&1; then
  aws --endpoint-url "$endpoint" batch describe-job-queues --query 'jobQueues[].[jobQueueName,state,status]' --output table
  aws --endpoint-url "$endpoint" batch list-service-jobs --job-queue quickstart-queue --job-status SUCCEEDED \
      --query 'jobSummaryList[].[jobName,status]' --output table
  aws --endpoint-url "$endpoint" sagemaker list-training-jobs --sort-by Name --sort-order Ascending \
      --query 'TrainingJobSummaries[].[TrainingJobName,TrainingJobStatus]' --output table
  aws --endpoint-url "$endpoint" sagemaker describe-training-job --training-job-name quickstart-1 \
      --query 'FinalMetricDataList[].[MetricName,Value]' --output table
else
  echo "   (the aws CLI is not installed; skipped)"
fi
echo "== and through the trainyard SDK (python/): ModelTrainer and TrainingQueue, as the SageMaker SDK names them"
AWS_ENDPOINT_URL="$endpoint" python3 "$root/examples/sdk/run_sdk.py" --queue quickstart-queue

echo "== PyTorch, for real: one instance, DDP over two, and a tuning job over the DDP job (examples/pytorch/run.py)"
if /usr/bin/env python3 -c 'import torch' 2>/dev/null || /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  AWS_ENDPOINT_URL="$endpoint" python3 "$root/examples/pytorch/run.py" --endpoint-url "$endpoint" --epochs 20
else
  echo "   (PyTorch is not installed: scripts/install-deps installs python3-torch; skipped)"
fi

echo "== done. The server stops now; start your own with: $bin serve"
