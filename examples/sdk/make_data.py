"""Writes train/, validation/ and test/ (one CSV each, y = 3x + 1 plus noise) under a directory."""
import os
import random
import sys


def make(root, seed=7):
    rnd = random.Random(seed)
    for name, n in (("train", 200), ("validation", 50), ("test", 50)):
        os.makedirs(os.path.join(root, name), exist_ok=True)
        with open(os.path.join(root, name, f"{name}.csv"), "w") as f:
            for _ in range(n):
                x = rnd.uniform(-1, 1)
                f.write(f"{x:.5f},{3 * x + 1 + rnd.gauss(0, 0.05):.5f}\n")


if __name__ == "__main__":
    make(sys.argv[1])
