"""Logistic regression trained with plain gradient descent: a small, real training job.

Follows the SageMaker script-mode contract: hyperparameters arrive as --name value arguments,
the training channel is read from SM_CHANNEL_TRAIN (generated data is used when there is none),
the model is written to SM_MODEL_DIR, and progress is printed as `epoch=N loss=X accuracy=Y`
lines that a MetricDefinitions regex turns into metrics.
"""
import argparse
import csv
import json
import math
import os
import random
import sys


def load_rows(channel_dir, seed):
    rows = []
    if channel_dir and os.path.isdir(channel_dir):
        for name in sorted(os.listdir(channel_dir)):
            if not name.endswith(".csv"):
                continue
            with open(os.path.join(channel_dir, name)) as f:
                for rec in csv.reader(f):
                    if rec and not rec[0].startswith("#"):
                        rows.append([float(v) for v in rec])
    if rows:
        return rows
    rng = random.Random(seed)
    for _ in range(400):
        x1, x2 = rng.gauss(0, 1), rng.gauss(0, 1)
        label = 1.0 if 1.5 * x1 - 2.0 * x2 + 0.3 + rng.gauss(0, 0.5) > 0 else 0.0
        rows.append([label, x1, x2])
    return rows


def sigmoid(z):
    if z < -60:
        return 0.0
    if z > 60:
        return 1.0
    return 1.0 / (1.0 + math.exp(-z))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--learning-rate", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=7)
    args, _ = parser.parse_known_args()

    rows = load_rows(os.environ.get("SM_CHANNEL_TRAIN"), args.seed)
    dims = len(rows[0]) - 1
    w = [0.0] * dims
    b = 0.0
    print(f"training on {len(rows)} rows, {dims} features, host {os.environ.get('SM_CURRENT_HOST')}", flush=True)
    for epoch in range(1, args.epochs + 1):
        gw = [0.0] * dims
        gb = 0.0
        loss = 0.0
        correct = 0
        for rec in rows:
            y, x = rec[0], rec[1:]
            p = sigmoid(sum(wi * xi for wi, xi in zip(w, x)) + b)
            loss -= y * math.log(max(p, 1e-12)) + (1 - y) * math.log(max(1 - p, 1e-12))
            correct += int((p >= 0.5) == (y >= 0.5))
            for i in range(dims):
                gw[i] += (p - y) * x[i]
            gb += p - y
        n = float(len(rows))
        w = [wi - args.learning_rate * gi / n for wi, gi in zip(w, gw)]
        b -= args.learning_rate * gb / n
        print(f"epoch={epoch} loss={loss / n:.6f} accuracy={correct / n:.4f}", flush=True)

    model_dir = os.environ.get("SM_MODEL_DIR", "/opt/ml/model")
    with open(os.path.join(model_dir, "model.json"), "w") as f:
        json.dump({"weights": w, "bias": b, "epochs": args.epochs}, f)
    # Keep a copy of what the platform handed us, so the contract can be checked afterwards.
    config_dir = os.environ.get("SM_INPUT_CONFIG_DIR", "/opt/ml/input/config")
    with open(os.path.join(model_dir, "contract.json"), "w") as f:
        contract = {
            "hyperparameters": json.load(open(os.path.join(config_dir, "hyperparameters.json"))),
            "resourceconfig": json.load(open(os.path.join(config_dir, "resourceconfig.json"))),
            "inputdataconfig": json.load(open(os.path.join(config_dir, "inputdataconfig.json"))),
            "channel_files": sorted(os.listdir(os.environ["SM_CHANNEL_TRAIN"])) if os.environ.get("SM_CHANNEL_TRAIN") else [],
            "env": {k: v for k, v in os.environ.items() if k.startswith(("SM_", "AWS_BATCH_", "TRAINING_JOB"))},
        }
        json.dump(contract, f, indent=1, sort_keys=True)
    print("model written to", model_dir, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
