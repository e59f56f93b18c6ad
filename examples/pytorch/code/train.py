"""A small PyTorch classifier, trained for real: script mode on one instance, or data-parallel
(DistributedDataParallel over gloo) when the torch-distributed launch starts it on several.

The SageMaker script-mode contract: hyperparameters arrive as --name value arguments, the model
goes to SM_MODEL_DIR, checkpoints to /opt/ml/checkpoints (resumed from when present, so a spot
interruption costs at most an epoch), and progress is printed as `epoch=N loss=X accuracy=Y`
lines (rank 0) that a MetricDefinitions regex turns into metrics. The data is generated: two
interleaved spirals, which a linear model cannot separate.
"""
import argparse
import math
import os

import torch
import torch.distributed as dist


def spirals(n, seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(n, generator=g) * 3 * math.pi
    label = torch.randint(0, 2, (n,), generator=g)
    r = t / (3 * math.pi)
    angle = t + label * math.pi
    x = torch.stack([r * torch.cos(angle), r * torch.sin(angle)], dim=1)
    return x + 0.02 * torch.randn(n, 2, generator=g), label


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--hidden", type=int, default=32)
    args, _ = p.parse_known_args()

    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1 and "LOCAL_RANK" in os.environ
    if distributed:
        dist.init_process_group("gloo")  # MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE from the launch
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, args.hidden), torch.nn.Tanh(),
                                torch.nn.Linear(args.hidden, args.hidden), torch.nn.Tanh(),
                                torch.nn.Linear(args.hidden, 2))
    net = torch.nn.parallel.DistributedDataParallel(model) if distributed else model
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)

    opt_ml = os.environ.get("TRAINYARD_OPT_ML", "/opt/ml")
    ckpt = os.path.join(opt_ml, "checkpoints", "checkpoint.pt")
    start = 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["epoch"]
        if rank == 0:
            print(f"resumed from the checkpoint of epoch {start}", flush=True)

    x, y = spirals(4096, seed=1)
    mine = torch.arange(rank, len(x), world)  # each rank its own shard
    test_x, test_y = spirals(1024, seed=2)
    for epoch in range(start + 1, args.epochs + 1):
        g = torch.Generator().manual_seed(epoch)
        order = mine[torch.randperm(len(mine), generator=g)]
        total = 0.0
        for i in range(0, len(order), 64):
            batch = order[i:i + 64]
            loss = torch.nn.functional.cross_entropy(net(x[batch]), y[batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(batch)
        with torch.no_grad():
            accuracy = (model(test_x).argmax(1) == test_y).float().mean().item()
        if rank == 0:
            print(f"epoch={epoch} loss={total / len(order):.4f} accuracy={accuracy:.4f}", flush=True)
            os.makedirs(os.path.dirname(ckpt), exist_ok=True)
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": epoch}, ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)
    if rank == 0:
        torch.save(model.state_dict(), os.path.join(os.environ.get("SM_MODEL_DIR", "."), "model.pt"))
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
