#!/usr/bin/env python3
"""Prints the markdown tables of docs/experiments/philly.md from the outputs of run.sh.

Usage: tables.py OUTDIR QUOTAS NAME...  (OUTDIR/NAME/{summary.json,jobs.csv}; QUOTAS from
philly_quotas.py). Besides summary.json, it measures from jobs.csv the GPU-hours left idle while
some job that would have fit on them was waiting (first start only: a preempted job that waits
again is not counted, so for quota shares it is a lower bound).
"""
import csv, json, sys

out, quotas, names = sys.argv[1], sys.argv[2], sys.argv[3:]
GPUS = 512
BIG = ["ee9e8c", "7f04ca", "b436b2", "6214e9", "2869ce"]


def h(s):  # seconds -> hours, short
    if s is None:
        return "-"
    return f"{s / 3600:.1f} h" if s >= 360 else f"{s / 60:.0f} min" if s >= 60 else f"{s:.0f} s"


def idle_while_waiting(path):
    ev = []  # (t, order, d_used, gpus waiting delta)
    for r in csv.DictReader(open(path)):
        g, sub = int(r["gpus"]), int(r["submit_s"])
        if r["start_s"] == "":
            ev.append((sub, 1, 0, g))
            continue
        st, en = int(r["start_s"]), int(r["end_s"])
        ev += [(sub, 1, 0, g), (st, 2, g, -g), (en, 0, -g, 0)]
    ev.sort()
    used = 0
    waiting = {}  # gpus -> count
    idle = 0.0
    last = ev[0][0]
    for t, _, du, dw in ev:
        if t > last and waiting and min(waiting) <= GPUS - used:
            idle += (GPUS - used) * (t - last)
        last = t
        used += du
        g = abs(dw) if dw else 0
        if dw > 0:
            waiting[g] = waiting.get(g, 0) + 1
        elif dw < 0:
            waiting[g] -= 1
            if not waiting[g]:
                del waiting[g]
    return idle / 3600


S = {n: json.load(open(f"{out}/{n}/summary.json")) for n in names}
print("| set-up | utilization | makespan | hours with jobs waiting | utilization while jobs waited | idle GPU-h while jobs waited | idle GPU-h while a fitting job waited | wait p50 | wait p90 | wait p99 | preemptions | GPU-h lost |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for n in names:
    s = S[n]
    w = s["wait_s"]
    assert s["never_started"] == 0, n
    print(f"| {n} | {s['gpu_utilization'] * 100:.1f}% | {s['makespan_s'] / 86400:.1f} d | "
          f"{s['hours_jobs_waited']:.0f} | {s['gpu_utilization_while_jobs_waited'] * 100:.1f}% | "
          f"{s['gpu_hours_idle_while_jobs_waited']:.0f} | {idle_while_waiting(f'{out}/{n}/jobs.csv'):.0f} | "
          f"{h(w['p50'])} | {h(w['p90'])} | {h(w['p99'])} | {s['preemptions']} | {s['gpu_hours_lost']:.0f} |")
print()
print("Wait p50 / p90 / p99 of the five VCs with the most GPU-hours (jobs in brackets):")
print()
print("| set-up | " + " | ".join(f"{t} ({S[names[0]]['teams'][t]['jobs']})" for t in BIG) + " |")
print("|---|" + "---|" * len(BIG))
for n in names:
    cells = []
    for t in BIG:
        w = S[n]["teams"][t]["wait_s"]
        cells.append(f"{h(w['p50'])} / {h(w['p90'])} / {h(w['p99'])}")
    print(f"| {n} | " + " | ".join(cells) + " |")
print()
print("GPU-hours received / entitled (thousands), per VC; quota from philly_quotas.py:")
print()
q = [l.split() for l in open(quotas)]
print("| VC | quota | demand | " + " | ".join(names) + " |")
print("|---|---|---|" + "---|" * len(names))
for share, gpus, _, teams in q:
    teams = teams.split(",")
    dem = sum(S[names[0]]["teams"][t]["gpu_hours_demand"] for t in teams)
    cells = []
    for n in names:
        rec = sum(S[n]["teams"][t]["gpu_hours_received"] for t in teams)
        ent = sum(S[n]["teams"][t]["gpu_hours_entitled"] for t in teams)
        cells.append(f"{rec / 1000:.1f} / {ent / 1000:.1f}")
    print(f"| {share} | {gpus} | {dem / 1000:.1f} | " + " | ".join(cells) + " |")
