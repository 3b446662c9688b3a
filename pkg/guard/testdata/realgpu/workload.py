# SPDX-License-Identifier: Apache-2.0
"""A GPU job for TestRealNVMLShared: training-like steps or inference-like requests.

train: each step runs --kernels bf16 matrix products on the GPU, then waits
--host-ms on the host (data loading), so the job leaves the GPU idle part of the
time, as real training does. infer: a request every --interval-ms, each a small
batch through --kernels products; its latency is measured from arrival to result.
--grow-at S: after S seconds, allocate until the whole device is --grow-frac full
(a job that outgrows its profile). Every second one JSON line goes to --stats:
cumulative steps or requests, and the mean latency of the second's requests.
"""
import argparse, json, os, sys, time

import torch

p = argparse.ArgumentParser()
p.add_argument("--mode", choices=["train", "infer"], required=True)
p.add_argument("--stats", required=True)
p.add_argument("--mem-gib", type=float, default=2.0)
p.add_argument("--size", type=int, default=8192)
p.add_argument("--kernels", type=int, default=16)
p.add_argument("--host-ms", type=float, default=15.0)
p.add_argument("--interval-ms", type=float, default=25.0)
p.add_argument("--grow-at", type=float, default=0.0)
p.add_argument("--grow-frac", type=float, default=0.965)
p.add_argument("--seconds", type=float, default=600.0)
a = p.parse_args()

dev = torch.device("cuda:0")
ballast = [torch.empty(int(a.mem_gib * 2**30), dtype=torch.uint8, device=dev)]
x = torch.randn(a.size, a.size, dtype=torch.bfloat16, device=dev)
w = torch.randn(a.size, a.size, dtype=torch.bfloat16, device=dev)
for _ in range(3):
    y = x @ w
torch.cuda.synchronize()

out = open(a.stats, "a", buffering=1)
def emit(**kv):
    out.write(json.dumps(kv) + "\n")

emit(event="ready", pid=os.getpid(), t=time.time())
start = time.time()
done, lat, grown = 0, [], a.grow_at <= 0
next_emit = start + 1.0
next_req = start
while time.time() - start < a.seconds:
    now = time.time()
    if not grown and now - start >= a.grow_at:
        free, total = torch.cuda.mem_get_info()
        want = int(free - (1 - a.grow_frac) * total)
        if want > 0:
            ballast.append(torch.empty(want, dtype=torch.uint8, device=dev))
            ballast[-1].fill_(1)
        torch.cuda.synchronize()
        grown = True
        emit(event="grown", bytes=max(want, 0), t=time.time())
    if a.mode == "train":
        for _ in range(a.kernels):
            y = x @ w
        torch.cuda.synchronize()
        time.sleep(a.host_ms / 1000)
        done += 1
    else:
        if now < next_req:
            time.sleep(min(next_req - now, 0.005))
        else:
            arrived = next_req
            for _ in range(a.kernels):
                y = x @ w
            torch.cuda.synchronize()
            lat.append(time.time() - arrived)
            done += 1
            next_req += a.interval_ms / 1000
            if next_req < time.time() - 1:  # fell far behind: drop the backlog
                next_req = time.time()
    if time.time() >= next_emit:
        emit(t=time.time(), done=done, lat_ms=1000 * sum(lat) / len(lat) if lat else None, n=len(lat))
        lat = []
        next_emit += 1.0
