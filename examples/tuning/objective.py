"""A training script whose objective is a known function of its hyperparameters.

score = 10 - (x - 3)^2 - (y - 0.2)^2 * 10 - (0 if opt == "good" else 2), approached over the
epochs as score * (1 - 0.5 ** epoch), printed once per epoch as `epoch=N score=V` so that a
MetricDefinitions regex reads intermediate values (early stopping) and a final one. Hyperparameters
arrive as --name value arguments (SageMaker's script mode); an epochs-like hyperparameter sets the
epoch count (Hyperband's resource). Each epoch takes `epoch_ms` milliseconds.
"""
import argparse
import sys
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--x", type=float, default=0.0)
    p.add_argument("--y", type=float, default=0.0)
    p.add_argument("--opt", default="good")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--epoch_ms", type=int, default=5)
    args, _ = p.parse_known_args()
    score = 10 - (args.x - 3) ** 2 - (args.y - 0.2) ** 2 * 10 - (0 if args.opt == "good" else 2)
    for epoch in range(1, args.epochs + 1):
        time.sleep(args.epoch_ms / 1000.0)
        print(f"epoch={epoch} score={score * (1 - 0.5 ** epoch):.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
