#!/usr/bin/env bash
# Side by side with Slurm, in one run on this machine: the definitions of the Slurm peer's
# bench.sh (a)-(d), measured for trainyard (local executor, real HTTP,
# SigV4-signed requests, default durability and sandbox) and then for the private Slurm peer.
#
#   bench/vs_slurm.sh            # both; results and a markdown table in bench/results/vs_slurm/
#
# Env knobs (same names and meaning as the peer's bench.sh):
#   N=1000 jobs for (a) and (b), NPEND=10000 queued jobs for (d), LAT_SAMPLES=50 for (c),
#   REPS=1 (Slurm's repetitions; trainyard runs each test REPS times too), P=8 parallel clients.
#   SLOTS=100: trainyard capacity, one 1-vCPU instance per job, like Slurm's 100 CPUs.
#   SLURM=run (default): run peers/slurm/bench.sh now; SLURM=file: take the Slurm column from
#   $PEERS/results/bench-full.txt (the 2026-11-22 run) instead, and say so in the table.
#   PEERS: the Slurm peer's directory (its install.sh, bench.sh and slurm.conf template), required.
#   OUT: results directory.
# Tears the Slurm peer down at the end (bench.sh does, and the EXIT trap again with --purge) and
# stops every trainyard server it started; leaves only the results directory, nothing under /tmp.
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  echo "usage: [N=1000] [NPEND=10000] [LAT_SAMPLES=50] [REPS=1] [P=8] [SLOTS=100] [SLURM=run|file] bench/vs_slurm.sh"
  sed -n '2,16s/^# \{0,1\}//p' "$0"
  exit 0
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/build/trainyard"
gen="$root/build/bench/ty_loadgen"
N=${N:-1000}
NPEND=${NPEND:-10000}
LAT_SAMPLES=${LAT_SAMPLES:-50}
REPS=${REPS:-1}
P=${P:-8}
SLOTS=${SLOTS:-100}
SLURM=${SLURM:-run}
PEERS=${PEERS:?set PEERS to the Slurm peer directory (install.sh, bench.sh); see bench/README.md}
PEERS="$(cd "$PEERS" && pwd)"
out="${OUT:-$root/bench/results/vs_slurm}"
mkdir -p "$out"
work="$(mktemp -d /tmp/ty-vs-slurm-XXXXXX)"
chmod 755 "$work"  # the job user reaches the mark directory inside it
pid=""
stop_server() { [[ -n $pid ]] && { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }; pid=""; }
cleanup() {
  stop_server
  rm -rf "$work"
  # --purge: leave nothing outside the repository and /tmp (the peer's state lives in
  # /var/tmp/slurm-peer); its slurm.conf is kept with the results first.
  if [[ $SLURM == run ]]; then
    cp "${SLURM_PEER_DIR:-/var/tmp/slurm-peer}/etc/slurm.conf" "$out/slurm.conf" 2>/dev/null || true
    "$PEERS/teardown.sh" --quiet --purge || true
  fi
}
trap cleanup EXIT
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# ------------------------------------------------------------------ trainyard
# A fresh server (new data directory) for each test, as bench.sh sets up a fresh cluster.
# Defaults kept: SQLite synchronous=FULL (every acknowledged submit is fsynced), the local
# executor with bubblewrap (sandbox = "auto"). EXTRA_TOML is appended (for labelled variants).
fresh_server() {
  stop_server
  local d="$work/data" extra="${1:-}"
  rm -rf "$d" "$work/mark"; mkdir -p "$d" "$work/mark"
  chmod 1777 "$work/mark"  # the jobs write their marks as executor.job_user when the server is root
  cat >"$work/config.toml" <<TOML
[executor]
sandbox_binds = ["$work/mark"]
$extra

[[instance_types]]
name = "ml.m5.large"
count = $SLOTS
vcpus = 1
memory_mib = 2000
TOML
  "$bin" serve --config "$work/config.toml" --listen 127.0.0.1:0 --data-dir "$d" --log-level warn >"$work/out" 2>"$work/log" &
  pid=$!
  for _ in $(seq 100); do grep -q listening "$work/out" && break; sleep 0.1; done
  url="$(sed -n 's/^listening on //p' "$work/out")"
  key="$(sed -n 's/^aws_access_key_id = //p' "$d/credentials")"
  secret="$(sed -n 's/^aws_secret_access_key = //p' "$d/credentials")"
  local ty=("$bin" call batch --endpoint-url "$url")
  export AWS_ACCESS_KEY_ID="$key" AWS_SECRET_ACCESS_KEY="$secret"
  # "parked": a disabled environment, so its jobs stay queued (Slurm: sbatch --hold).
  "${ty[@]}" CreateServiceEnvironment '{"serviceEnvironmentName":"parked","serviceEnvironmentType":"SAGEMAKER_TRAINING","state":"DISABLED","capacityLimits":[{"maxCapacity":'"$SLOTS"',"capacityUnit":"NUM_INSTANCES"}]}' >/dev/null
  "${ty[@]}" CreateJobQueue '{"jobQueueName":"parked","jobQueueType":"SAGEMAKER_TRAINING","priority":1,"serviceEnvironmentOrder":[{"order":1,"serviceEnvironment":"parked"}]}' >/dev/null
  "${ty[@]}" CreateServiceEnvironment '{"serviceEnvironmentName":"run","serviceEnvironmentType":"SAGEMAKER_TRAINING","capacityLimits":[{"maxCapacity":'"$SLOTS"',"capacityUnit":"NUM_INSTANCES"}]}' >/dev/null
  "${ty[@]}" CreateJobQueue '{"jobQueueName":"run","jobQueueType":"SAGEMAKER_TRAINING","priority":1,"serviceEnvironmentOrder":[{"order":1,"serviceEnvironment":"run"}]}' >/dev/null
}
lg() { "$gen" "$1" --endpoint "$url" --key "$key" --secret "$secret" "${@:2}"; }
cpu_ticks() { awk '{print $14, $15, $16, $17}' "/proc/$pid/stat"; }
cpu_per_job() { python3 -c "import os,sys; a=list(map(int,sys.argv[1].split())); b=list(map(int,sys.argv[2].split())); i=int(sys.argv[3]); print(round((b[i]+b[i+1]-a[i]-a[i+1])*1000/os.sysconf('SC_CLK_TCK')/$N,2))" "$1" "$2" "$3"; }
rss_kb() { awk '/^VmRSS/{print $2}' "/proc/$pid/status"; }
val() { python3 -c "import json,sys; print(round(json.loads(sys.argv[1])[sys.argv[2]], int(sys.argv[3])))" "$1" "$2" "${3:-1}"; }

TY="$out/trainyard.txt"
: >"$TY"; : >"$out/trainyard.json"
emit() { echo "$1=$2" | tee -a "$TY"; }
emit meta.git "$(git -C "$root" rev-parse --short HEAD)"
emit meta.N "$N"; emit meta.NPEND "$NPEND"; emit meta.P "$P"; emit meta.SLOTS "$SLOTS"; emit meta.LAT_SAMPLES "$LAT_SAMPLES"
emit meta.sandbox "$(command -v bwrap >/dev/null && echo bwrap || echo none)"
for ((r = 1; r <= REPS; r++)); do
  log "trainyard rep $r: submit"
  fresh_server; j=$(lg submit --queue parked --jobs "$N" --connections 1); echo "$j" >>"$out/trainyard.json"
  emit "rep$r.submit_serial_jobs_per_s" "$(val "$j" submits_per_second)"
  fresh_server; j=$(lg submit --queue parked --jobs "$N" --connections "$P"); echo "$j" >>"$out/trainyard.json"
  emit "rep$r.submit_par${P}_jobs_per_s" "$(val "$j" submits_per_second)"

  log "trainyard rep $r: e2e"
  fresh_server; c0=$(cpu_ticks); j=$(lg e2e --queue run --jobs "$N" --connections "$P"); c1=$(cpu_ticks)
  echo "$j" >>"$out/trainyard.json"
  # CPU per job: the server's own (utime+stime) and its reaped children's (cutime+cstime: the
  # supervisor of each attempt and the job's processes, bubblewrap included).
  emit "rep$r.e2e_cpu_server_ms_per_job" "$(cpu_per_job "$c0" "$c1" 0)"
  emit "rep$r.e2e_cpu_children_ms_per_job" "$(cpu_per_job "$c0" "$c1" 2)"
  emit "rep$r.e2e_submit_phase_jobs_per_s" "$(val "$j" submit_phase_jobs_per_second)"
  emit "rep$r.e2e_s" "$(val "$j" seconds 2)"
  emit "rep$r.e2e_jobs_per_s" "$(val "$j" jobs_per_second)"
  emit "rep$r.e2e_failed" "$(val "$j" failed 0)"
  # Labelled variant, not the headline: the same without the bubblewrap sandbox.
  fresh_server 'sandbox = "none"'; j=$(lg e2e --queue run --jobs "$N" --connections "$P"); echo "$j" >>"$out/trainyard.json"
  emit "rep$r.e2e_nosandbox_jobs_per_s" "$(val "$j" jobs_per_second)"

  log "trainyard rep $r: latency"
  fresh_server; j=$(lg startlat --queue run --jobs "$LAT_SAMPLES" --mark-dir "$work/mark"); echo "$j" >>"$out/trainyard.json"
  emit "rep$r.lat_start_p50_ms" "$(val "$j" start_ms_p50)"
  emit "rep$r.lat_start_p99_ms" "$(val "$j" start_ms_p99)"
  emit "rep$r.lat_start_max_ms" "$(val "$j" start_ms_max)"
  emit "rep$r.lat_submit_call_p50_ms" "$(val "$j" submit_call_ms_p50)"

  log "trainyard rep $r: pending"
  fresh_server; sleep 1
  base=$(rss_kb)
  j=$(lg submit --queue parked --jobs "$NPEND" --connections "$P"); echo "$j" >>"$out/trainyard.json"
  sleep 2
  emit "rep$r.ctld_rss_idle_mb" "$(python3 -c "print(round($base/1024,1))")"
  emit "rep$r.ctld_rss_pend_mb" "$(python3 -c "print(round($(rss_kb)/1024,1))")"
done
stop_server

# ------------------------------------------------------------------ Slurm
SL="$out/slurm.txt"
if [[ $SLURM == run ]]; then
  log "slurm: peers/slurm/bench.sh all (N=$N NPEND=$NPEND LAT_SAMPLES=$LAT_SAMPLES REPS=$REPS P=$P)"
  # bench.sh asks `sbatch --version` before its first setup; without a slurm.conf that call
  # retries for 60 s, so bring a cluster up first (bench.sh sets up a fresh one per test anyway).
  "$PEERS/setup.sh" tput >/dev/null 2>"$out/slurm.log"
  N=$N NPEND=$NPEND LAT_SAMPLES=$LAT_SAMPLES REPS=$REPS P=$P "$PEERS/bench.sh" all >"$SL" 2>>"$out/slurm.log"
  src="measured in this run ($(date -u +%F), N=$N, NPEND=$NPEND, LAT_SAMPLES=$LAT_SAMPLES, REPS=$REPS, P=$P)"
else
  cp "$PEERS/results/bench-full.txt" "$SL"
  src="NOT this run: peers/slurm/results/bench-full.txt (2026-11-22, same machine, N=5000, 3 reps, median)"
fi

# ------------------------------------------------------------------ table
python3 - "$TY" "$SL" "$src" "$P" <<'PY' | tee "$out/table.md"
import re, sys, statistics as st
def load(path):
    reps, meds = {}, {}
    for line in open(path):
        for tok in line.split():
            m = re.match(r"rep\d+\.(\S+?)=(\S+)$", tok)
            if m:
                try: reps.setdefault(m.group(1), []).append(float(m.group(2)))
                except ValueError: pass
            m = re.match(r"(\S+)\.median=(\S+)$", tok)
            if m: meds[m.group(1)] = float(m.group(2))
    return {k: st.median(v) for k, v in reps.items()} | meds
ty, sl = load(sys.argv[1]), load(sys.argv[2])
P = sys.argv[4]
rows = [  # key, label, unit, higher is better
    ("submit_serial_jobs_per_s", "(a) submit rate, 1 client, queued/held jobs", "jobs/s", True),
    (f"submit_par{P}_jobs_per_s", f"(a) submit rate, {P} parallel clients", "jobs/s", True),
    ("e2e_jobs_per_s", f"(b) end-to-end, trivial jobs (`true`), {P} submitters", "jobs/s", True),
    ("e2e_submit_phase_jobs_per_s", "(b) submit rate during (b)", "jobs/s", True),
    ("lat_start_p50_ms", "(c) submit → job's first line, idle, p50", "ms", False),
    ("lat_start_p99_ms", "(c) submit → job's first line, idle, p99", "ms", False),
    ("lat_start_max_ms", "(c) same, max", "ms", False),
    ("ctld_rss_idle_mb", "(d) controller RSS, idle", "MB", False),
    ("ctld_rss_pend_mb", "(d) controller RSS, 10,000 queued jobs", "MB", False),
]
goal = {"submit_serial_jobs_per_s", f"submit_par{P}_jobs_per_s", "e2e_jobs_per_s", "lat_start_p50_ms", "lat_start_p99_ms"}
print(f"Slurm column: {sys.argv[3]}.\n")
print("| metric | trainyard | Slurm | trainyard vs Slurm | 50× goal |")
print("|---|---|---|---|---|")
for k, label, unit, hib in rows:
    a, b = ty.get(k), sl.get(k)
    if a is None or b is None:
        print(f"| {label} | {a if a is not None else '–'} {unit} | {b if b is not None else '–'} {unit} | | |"); continue
    ratio = (a / b if hib else b / a) if (a and b) else float("nan")
    word = "faster" if unit != "MB" else "less"
    g = ""
    if k in goal:
        g = "met" if ratio >= 50 else f"not met: {ratio/50:.2f} of the goal ({50/ratio:.1f}× short)"
    print(f"| {label} | {a:g} {unit} | {b:g} {unit} | **{ratio:.1f}×** {'' if ratio >= 1 else '(Slurm better) '}| {g} |")
if "e2e_nosandbox_jobs_per_s" in ty:
    a, b = ty["e2e_nosandbox_jobs_per_s"], sl.get("e2e_jobs_per_s")
    print(f"| (b) variant: trainyard with `sandbox = \"none\"` (not the default) | {a:g} jobs/s | {b:g} jobs/s | {a/b:.1f}× | |")
PY
log "done: $out/table.md"
