"""Train a plain classifier on CIFAR-10 (or any dataset ``laya`` loads) and write its state dict as safetensors.

The stand-in for "your trained network": a timm or torchvision architecture trained end to end with its own
classifier, nothing of LAYA in it, so that ``laya attach`` can then be tried on it. Resumable: the state after
each epoch is kept in ``OUT.state.safetensors`` and a rerun goes on from it.

    python scripts/train_network.py --family torchvision --model resnet18 --epochs 6 --out runs/own/resnet18.safetensors

Recipe: AdamW 1e-3 (weight decay 0.05), cosine schedule, batch 128, random flip and 4-pixel shift, inputs scaled
to [0, 1] and normalised by ``--mean``/``--std`` (the values to pass to ``laya attach``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from laya.data.datasets import InputSpec, Preprocess, batch_indices, load_dataset  # noqa: E402
from laya.training.train import flip_crop, seed_everything  # noqa: E402


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(v) for v in text.split(","))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--family", required=True, choices=["timm", "torchvision"])
    p.add_argument("--model", required=True, help="architecture name in the family")
    p.add_argument("--model-kwargs", type=json.loads, default={}, help="architecture arguments, JSON (default: none)")
    p.add_argument("--dataset", default="cifar10", help="dataset name or ImageFolder path (default: cifar10)")
    p.add_argument("--image-size", type=int, default=0, help="side the network sees, bilinear resize; 0 = the data's (default: 0)")
    p.add_argument("--epochs", type=int, default=6, help="epochs (default: 6)")
    p.add_argument("--batch-size", type=int, default=128, help="batch size (default: 128)")
    p.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (default: 1e-3)")
    p.add_argument("--mean", type=_floats, default=(0.5, 0.5, 0.5), help="normalisation mean (default: 0.5,0.5,0.5)")
    p.add_argument("--std", type=_floats, default=(0.5, 0.5, 0.5), help="normalisation std (default: 0.5,0.5,0.5)")
    p.add_argument("--seed", type=int, default=0, help="seed (default: 0)")
    p.add_argument("--threads", type=int, default=0, help="torch threads, 0 = torch's default (default: 0)")
    p.add_argument("--out", type=Path, required=True, help="the .safetensors state dict to write")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    seed_everything(args.seed)
    train, test = load_dataset(args.dataset, "train", stream=False), load_dataset(args.dataset, "test", stream=False)
    classes = len(train.classes)
    if args.family == "timm":
        from laya.model.backbones.timm import timm_models  # timm, laya's CIFAR ResNets registered in it

        net = timm_models().create_model(args.model, pretrained=False, num_classes=classes, **args.model_kwargs)
    else:
        import torchvision

        net = torchvision.models.get_model(args.model, weights=None, num_classes=classes, **args.model_kwargs)
    prepare = Preprocess(InputSpec(train.channels, train.image_size, args.image_size or train.image_size,
                                   args.mean, args.std))  # as laya attach will: /255, bilinear resize, normalise

    steps_per_epoch = math.ceil(len(train) / args.batch_size)
    optimiser = torch.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=0.05)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimiser, max_lr=args.lr, total_steps=args.epochs * steps_per_epoch, pct_start=0.15
    )
    state_path = args.out.with_suffix(".state.safetensors")
    start = 0
    if state_path.exists():  # resume: weights, then the optimiser and schedule replayed to the epoch reached
        saved = load_file(state_path)
        start = int(saved.pop("__epoch__").item())
        net.load_state_dict(saved)
        for _ in range(start * steps_per_epoch):
            schedule.step()
        print(f"resumed after epoch {start}", flush=True)
    generator = torch.Generator().manual_seed(args.seed)
    for epoch in range(start, args.epochs):
        net.train()
        order = torch.randperm(len(train), generator=torch.Generator().manual_seed(args.seed + epoch))
        began = time.perf_counter()
        for index in tqdm(batch_indices(len(train), args.batch_size), desc=f"epoch {epoch + 1}/{args.epochs}"):
            index = order[index]
            x = prepare(flip_crop(train.images[index], generator))
            loss = F.cross_entropy(net(x), train.labels[index])
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            schedule.step()
        accuracy = evaluate(net, test, prepare, args.batch_size * 4)
        print(f"epoch {epoch + 1}: {time.perf_counter() - began:.0f} s, test accuracy {accuracy:.4f}", flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        save_file({**net.state_dict(), "__epoch__": torch.tensor(epoch + 1)}, state_path)
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, args.out)
    print(f"wrote {args.out}", flush=True)


@torch.no_grad()
def evaluate(net: torch.nn.Module, data, prepare, batch_size: int) -> float:
    net.eval()
    correct = 0
    for index in batch_indices(len(data), batch_size):
        correct += int((net(prepare(data.images[index])).argmax(1) == data.labels[index]).sum())
    return correct / len(data)


if __name__ == "__main__":
    main()
