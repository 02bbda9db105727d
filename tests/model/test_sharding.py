"""A pass split between processes by batch and put back in order: the shares, the gather, the sharded feature cache
(two gloo processes, uneven batches) and the main process's folder and printouts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from safetensors.torch import load_file, save_file
from torch import nn

from laya.data.datasets import InputSpec, Preprocess
from laya.data.features import cached_hidden_states, hidden_states
from laya.model.backbones import BackboneConfig, build_backbone
from laya.model.devices import Placement
from laya.model.sharding import (
    Shard,
    broadcast_module,
    gather_batches,
    main_says,
    quiet_unless_main,
    scratch_unless_main,
    torchrun_placement,
)

REPO = Path(__file__).resolve().parents[2]
SIZES = (4, 4, 4, 4, 4, 4, 1)  # 25 inputs in 7 batches: process 0 owns 4 batches (13 rows), process 1 three (12)


def test_shares_runs_and_rounds():
    first, second = Shard(SIZES, 0, 2), Shard(SIZES, 1, 2)
    assert first.owned == [0, 2, 4, 6] and second.owned == [1, 3, 5]
    assert Shard((5,), 1, 2).owned == [] and Shard((5,), 1, 2).run == [0]  # more processes than batches
    assert [r.sizes for r in second.rounds()] == [(4, 4), (4, 4), (4, 4), (1,)]
    assert [r.owned for r in second.rounds()] == [[1], [1], [1], []]


def test_gather_in_one_process_is_the_concatenation_and_drops_the_stand_in():
    local = torch.arange(12).view(6, 2)
    assert gather_batches(local, [4, 2]).equal(local)
    flags = torch.tensor([True, False, True])
    assert gather_batches(flags, [3]).equal(flags)
    with pytest.raises(ValueError, match="holds 6 rows, its batches have 5"):
        gather_batches(local, [4, 1])
    assert Shard.of([torch.arange(4), torch.arange(4, 6)]).gather([local[:4], local[4:]]).equal(local)
    assert Shard((), 0, 1).run == [0] and Shard((), 0, 1).gather([local]).shape == (0, 2)  # the stand-in dropped


def test_one_process_placement_is_the_cpu(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert torchrun_placement() == Placement()


def test_the_main_process_writes_the_folder_and_prints(tmp_path, capsys):
    with scratch_unless_main(Placement(), tmp_path / "out") as out:
        assert out == tmp_path / "out"
    with scratch_unless_main(Placement(rank=1, world=2), tmp_path / "out") as out, quiet_unless_main(
        Placement(rank=1, world=2)
    ):
        assert out != tmp_path / "out" and out.is_dir()
        (out / "file").write_text("x")
        print("repeated")
    assert not out.exists() and not (tmp_path / "out").exists()
    with quiet_unless_main(Placement()):
        print("once")
    assert capsys.readouterr().out == "once\n"


def _model() -> tuple[nn.Module, Preprocess, torch.Tensor]:
    torch.manual_seed(0)
    backbone = build_backbone(BackboneConfig(name="mlp", in_channels=1, input_size=4, widths=(8, 5)))
    images = torch.randint(0, 256, (sum(SIZES), 1, 4, 4), generator=torch.Generator().manual_seed(1)).to(torch.uint8)
    return backbone, Preprocess(InputSpec(1, 4, 4, (0.5,), (0.5,))), images


def _process(folder: Path) -> None:
    """One of two gloo processes (``torchrun``): the sharded feature cache, a gather of uneven shares, a broadcast,
    a decision taken by the main process; what each holds is written to ``folder/rank<r>.safetensors``."""
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    backbone, preprocess, images = _model()
    features = cached_hidden_states(backbone, preprocess, images, batch_size=4, shard=True)
    shard = Shard(SIZES, rank, 2)
    rows = torch.cat([torch.arange(s) + 10 * b for b, s in enumerate(SIZES) if b in shard.owned])
    flags = torch.cat([torch.arange(s) % 2 == b % 2 for b, s in enumerate(SIZES) if b in shard.owned])
    own = nn.Linear(2, 2)
    torch.nn.init.constant_(own.weight, float(rank))
    broadcast_module(own)
    out = {f"layer_{i}": f.clone() for i, f in enumerate(features)}
    out |= {"rows": shard.gather([rows]), "flags": shard.gather([flags]).to(torch.uint8), "weight": own.weight.detach(),
            "says": torch.tensor([int(main_says(rank == 0))])}  # fmt: skip
    save_file(out, str(folder / f"rank{rank}.safetensors"))
    dist.destroy_process_group()


def test_two_gloo_processes_give_what_one_computes(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "LAYA_CACHE": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "-m", "tests.model.test_sharding", str(tmp_path)]  # fmt: skip
    result = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    backbone, preprocess, images = _model()
    expected = hidden_states(backbone, preprocess, images, batch_size=4)
    order = torch.cat([torch.arange(s) + 10 * b for b, s in enumerate(SIZES)])
    flags = torch.cat([torch.arange(s) % 2 == b % 2 for b, s in enumerate(SIZES)])
    for rank in (0, 1):
        got = load_file(str(tmp_path / f"rank{rank}.safetensors"))
        assert all(got[f"layer_{i}"].equal(h) for i, h in enumerate(expected))  # bit for bit, every process
        assert got["rows"].equal(order) and got["flags"].bool().equal(flags)
        assert got["weight"].eq(0).all() and got["says"].item() == 1  # the main process's weights and decision
    assert len(list((tmp_path / "cache" / "features").iterdir())) == 1  # one cache, no process's temporary left


if __name__ == "__main__":  # one process of the test above, started by torchrun
    _process(Path(sys.argv[1]))
