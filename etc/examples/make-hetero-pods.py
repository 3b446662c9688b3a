#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Alibaba-format pod list from Philly jobs, whose pods name GPU models.

Not a measured trace: Philly's submit times, durations and GPU counts, with a
random gpu_spec and fractional GPUs, for simulating a heterogeneous cluster.
usage: make-hetero-pods.py PHILLY_CSV SEED N > pods.csv
"""
import csv, random, sys
from datetime import datetime

src, seed, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
rows = [r for r in csv.DictReader(open(src))
        if float(r["duration"]) > 0 and float(r["duration"]) <= 86400 and int(r["num_gpus"]) in (1, 2, 4, 8)]
rows = rng.sample(rows, n)
ts = lambda r: datetime.strptime(r["timestamp"], "%Y-%m-%d %H:%M:%S").timestamp()
rows.sort(key=ts)
t0 = ts(rows[0])
specs = [("", 45), ("V100M16", 14), ("A100", 12), ("T4", 9), ("V100M16|T4", 8), ("H100", 7), ("A100|H100", 5)]
w = csv.writer(sys.stdout, lineterminator="\n")
w.writerow("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time".split(","))
for i, r in enumerate(rows):
    g = int(r["num_gpus"])
    milli = 1000
    if g == 1 and rng.random() < 0.28:
        milli = rng.choice((250, 500, 750))
    spec = rng.choices([s for s, _ in specs], [p for _, p in specs])[0]
    c = int(ts(r) - t0)
    s = c + rng.randint(0, 30)
    w.writerow([f"pod-{i:04d}", 4000 * g, 16384 * g, g, milli, spec, rng.choice(("LS", "BE")), "Succeeded", c, s + int(float(r["duration"])), s])
