"""Writes a small labelled CSV (label,x1,x2) for the quick start's training channel."""
import random
import sys

out = sys.argv[1]
rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 42)
with open(out, "w") as f:
    for _ in range(500):
        x1, x2 = rng.gauss(0, 1), rng.gauss(0, 1)
        label = 1 if 1.5 * x1 - 2.0 * x2 + 0.3 + rng.gauss(0, 0.5) > 0 else 0
        f.write(f"{label},{x1:.5f},{x2:.5f}\n")
