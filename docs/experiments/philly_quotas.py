#!/usr/bin/env python3
"""Sizes each Philly virtual cluster's GPUs from its demand in the trace and prints the shares.

Rule (docs/experiments/philly.md, "Sizing"): the GPUs are split in proportion to each VC's
GPU-hours in the trace, except that no VC gets less than its largest job (a static partition
smaller than a job never runs it); VCs raised to that floor keep it and the rest is split again
among the others, largest remainders rounding to whole GPUs. The four VCs with under 200
GPU-hours together (18 jobs) are pooled as one share, "other".

Usage: philly_quotas.py TRACE GPUS   -> one line per share: name gpus gpu_hours teams
"""
import collections, csv, sys

trace, total = sys.argv[1], int(sys.argv[2])
hours, largest = collections.Counter(), collections.Counter()
for r in csv.DictReader(open(trace)):
    g = int(r["num_gpus"])
    hours[r["team"]] += g * int(r["duration_s"]) / 3600
    largest[r["team"]] = max(largest[r["team"]], g)
teams = {t: [t] for t in hours if hours[t] >= 200}
teams["other"] = sorted(t for t in hours if hours[t] < 200)
h = {s: sum(hours[t] for t in ts) for s, ts in teams.items()}
big = {s: max(largest[t] for t in ts) for s, ts in teams.items()}
fixed = {}
while True:
    free = {s: h[s] for s in teams if s not in fixed}
    left = total - sum(fixed.values())
    raw = {s: left * v / sum(free.values()) for s, v in free.items()}
    low = [s for s, v in raw.items() if v < big[s]]
    if not low:
        break
    for s in low:
        fixed[s] = big[s]
quota = {s: int(v) for s, v in raw.items()}
for s in sorted(raw, key=lambda s: raw[s] - int(raw[s]), reverse=True)[: left - sum(quota.values())]:
    quota[s] += 1
quota.update(fixed)
assert sum(quota.values()) == total
for s in sorted(quota, key=lambda s: -h[s]):
    print(s, quota[s], round(h[s]), ",".join(teams[s]))
