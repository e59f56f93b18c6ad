#!/usr/bin/env python3
"""Start overhead of a cached OCI image vs. the host's software (docs/images.md, bench/README.md).

Builds a busybox image offline (tests/integration/tiny_image.py), then runs
build/bench/image_start_bench: the first fetch (skopeo copy + umoci unpack) once, then N starts
of `true` in an instance's sandbox with each root, interleaved; median and p90 of each.

    python3 bench/image_start.py [--runs N] [--bin build/bench/image_start_bench]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import tiny_image  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "build", "bench", "image_start_bench"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="trainyard-image-bench-")
    os.chmod(work, 0o755)  # the job user makes its mount points below it, as under an attempt directory
    try:
        layout = os.path.join(work, "layout")
        tiny_image.build(layout, "bench", files={"usr/local/bin/train": ("#!/bin/sh\ntrue\n", 0o755)})
        subprocess.check_call([args.bin, "--cache", os.path.join(work, "cache"), "--image", f"oci:{layout}:bench",
                               "--runs", str(args.runs)])
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
