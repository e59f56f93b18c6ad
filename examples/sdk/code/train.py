"""A small training script for the SDK example: fits y = a*x + b to the train channel by
gradient descent, reports loss on the validation and test channels, saves the model.

It reads its channels and model directory from the SM_* variables, as SageMaker scripts do.
An optional gate (the environment variable GATE: a file to wait for) lets a test hold a job
running while it submits others."""
import argparse
import csv
import glob
import json
import os
import time

import setuptools  # the requirements.txt entry, installed (or found) before this runs


def rows(channel):
    d = os.environ[f"SM_CHANNEL_{channel.upper()}"]
    files = sorted(glob.glob(os.path.join(d, "*.csv")))
    if not files:
        raise SystemExit(f"channel {channel}: no .csv directly in {d} (found: {os.listdir(d)})")
    out = []
    for f in files:
        with open(f) as fh:
            out += [(float(x), float(y)) for x, y in csv.reader(fh)]
    return out


def loss(data, a, b):
    return sum((a * x + b - y) ** 2 for x, y in data) / len(data)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.05)
    args = p.parse_args()
    gate = os.environ.get("GATE")
    if gate:
        while not os.path.exists(gate):
            time.sleep(0.05)
    train, val, test = rows("train"), rows("validation"), rows("test")
    print(f"channels: train={len(train)} validation={len(val)} test={len(test)} rows; setuptools {setuptools.__version__}")
    a = b = 0.0
    for epoch in range(args.epochs):
        ga = sum(2 * (a * x + b - y) * x for x, y in train) / len(train)
        gb = sum(2 * (a * x + b - y) for x, y in train) / len(train)
        a, b = a - args.lr * ga, b - args.lr * gb
        print(f"epoch={epoch} loss={loss(train, a, b):.6f} val_loss={loss(val, a, b):.6f}", flush=True)
    print(f"test_loss={loss(test, a, b):.6f}")
    with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.json"), "w") as f:
        json.dump({"a": a, "b": b}, f)


if __name__ == "__main__":
    main()
