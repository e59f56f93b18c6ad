#!/usr/bin/env python3
"""Synthetic trace and cluster files for the scale figure of bench/README.md.

Usage: gen_scale_trace.py OUTDIR [JOBS] [SHARES] [GPUS] [LOAD]   (defaults 1000000 1000 10000 0.9)

Writes OUTDIR/trace.csv (the normalized trace format), OUTDIR/quota.toml (one LEND_AND_BORROW
quota share per team, the GPUs split evenly, hourly checkpoints) and OUTDIR/fifo.toml. Seeded:
the same arguments give the same files. Jobs: 93% one GPU, the rest 2-64 GPUs (Philly's mix,
capped); durations log-normal (median ~20 min, mean ~1.2 h, capped at 3 days); teams drawn from a
Zipf(1.1) law, so a few shares want far more than their quota; Poisson arrivals at a rate that
offers LOAD (default 90%) of the GPUs on average.
"""
import math, os, random, sys

if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
    print(__doc__.strip())
    sys.exit(0 if len(sys.argv) >= 2 else 2)
out = sys.argv[1]
jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
shares = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
gpus = int(sys.argv[4]) if len(sys.argv) > 4 else 10000
load = float(sys.argv[5]) if len(sys.argv) > 5 else 0.9
rng = random.Random(20261123)
os.makedirs(out, exist_ok=True)

sizes = [(1, 0.93), (2, 0.025), (4, 0.025), (8, 0.015), (16, 0.004), (32, 0.0008), (64, 0.0002)]
zipf = [1 / (k + 1) ** 1.1 for k in range(shares)]
zsum = sum(zipf)
cum, acc = [], 0.0
for z in zipf:
    acc += z / zsum
    cum.append(acc)


def team():
    u = rng.random()
    lo, hi = 0, shares - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if cum[mid] < u:
            lo = mid + 1
        else:
            hi = mid
    return lo


def size():
    u = rng.random()
    for g, p in sizes:
        if u < p:
            return g
        u -= p
    return 1


mu, sigma = math.log(1200), 1.6
mean_gpus = sum(g * p for g, p in sizes) / sum(p for _, p in sizes)
mean_dur = math.exp(mu + sigma**2 / 2)
rate = load * gpus / (mean_gpus * mean_dur)  # jobs per second
t = 0.0
with open(os.path.join(out, "trace.csv"), "w") as f:
    f.write("job_id,submit_time_s,duration_s,num_gpus,user,team,status\n")
    for i in range(jobs):
        t += rng.expovariate(rate)
        d = max(1, min(259200, int(rng.lognormvariate(mu, sigma))))
        f.write(f"j{i},{int(t)},{d},{size()},,t{team():04d},\n")

with open(os.path.join(out, "quota.toml"), "w") as f:
    f.write(f"# {shares} quota shares of {gpus // shares} GPUs (bench/gen_scale_trace.py)\n")
    f.write(f'gpus = {gpus}\npolicy = "quota"\ncheckpoint_interval_s = 3600\nrestart_cost_s = 300\n\n')
    for k in range(shares):
        f.write(f"[shares.t{k:04d}]\ngpus = {gpus // shares}\n")
    f.write('\n[defaults]\nshare = "t0000"\n\n[teams]\n')
    for k in range(shares):
        f.write(f't{k:04d} = {{ share = "t{k:04d}" }}\n')
with open(os.path.join(out, "fifo.toml"), "w") as f:
    f.write(f'gpus = {gpus}\npolicy = "fifo"\n')
print(f"{jobs} jobs over {t / 86400:.1f} days, {rate:.3f} jobs/s, mean {mean_gpus:.2f} GPUs x {mean_dur:.0f} s")
