"""benchmarks/spatial_maps.py: the anchors read the same layers as the exact maps, and the benchmark runs end to end."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
pytest.importorskip("pytorch_grad_cam")

import spatial_maps

from laya.analysis.head.spatial import spatial_attribution
from laya.analysis.sample import sample_indices
from laya.data.datasets import ImageArrays
from laya.model.checkpoint import load_checkpoint


@pytest.mark.parametrize("setting", ["cifar10-cnn", "cifar10-efficientnet-lite0"])
def test_anchor_modules_output_the_maps_the_exact_maps_split(setting):
    """Every layer with an exact map has a hook module whose output has that map's grid (EfficientNet: the
    pre-logits layer's module is the one whose output ``forward_head`` pools)."""
    ck = load_checkpoint(ROOT / "models" / setting / "laya")
    model = ck.model.eval()
    modules = spatial_maps.cam_modules(model.backbone)
    seen: dict[int, tuple] = {}

    def record(i: int):
        def hook(module, args, out) -> None:  # returns None: the output is left alone
            seen.setdefault(i, tuple(out.shape[-2:]))

        return hook

    handles = [m.register_forward_hook(record(i)) for i, m in enumerate(modules)]
    x = ck.preprocess(torch.randint(0, 256, (1, 3, 32, 32), dtype=torch.uint8))
    try:
        _, spatial = spatial_attribution(model, x, top_k=1)
    finally:
        for h in handles:
            h.remove()
    assert all(m is not None for m in modules)
    assert [seen[i] for i in range(len(modules))] == [tuple(m.shape[-2:]) for m in spatial.maps]


def test_exact_all_layer_map_sums_the_layer_densities():
    ck = load_checkpoint(ROOT / "models" / "cifar10-cnn" / "laya")
    model = ck.model.eval()
    x = ck.preprocess(
        torch.randint(0, 256, (2, 3, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    )
    target = model(x).logits.argmax(1)
    maps = spatial_maps.exact_maps(model, x, target, 32)
    assert list(maps) == [*model.layer_names, spatial_maps.ALL]
    assert all(m.dtype == torch.float64 for m in maps.values())  # summed and ranked in float64
    assert torch.allclose(maps[spatial_maps.ALL], sum(maps[n] for n in model.layer_names))
    _, spatial = spatial_attribution(model, x, classes=target.view(-1, 1))
    for i, name in enumerate(model.layer_names):  # densities: a layer's frame pixels sum to its map's positions
        want = spatial.maps[i].sum((-2, -1))[:, 0]
        assert torch.allclose(maps[name].sum((1, 2)), want, rtol=1e-4, atol=1e-6), name
    logit_part = (spatial.terms - spatial.offsets).sum(1)[:, 0].double()  # the logit minus the position-free parts
    assert torch.allclose(maps[spatial_maps.ALL].sum((1, 2)), logit_part, rtol=1e-4)


def test_sample_is_class_balanced_and_seeded():
    """The benchmark's images: ``sample_indices``' class-balanced draw from the whole test split, not its first n
    (CIFAR-10's test split sorted by class would give only airplanes), the same for the same seed."""
    labels = torch.arange(10).repeat_interleave(100)  # class-sorted, like the first-n problem
    images = torch.arange(1000, dtype=torch.uint8).view(-1, 1, 1, 1).expand(-1, 3, 2, 2).clone()
    data = ImageArrays(images, labels, tuple("abcdefghij"))
    ck = SimpleNamespace(load_data=lambda split: data, meta=None)
    x, y, words = spatial_maps.balanced_images(ck, 50, seed=3)
    assert torch.bincount(y, minlength=10).tolist() == [5] * 10
    assert torch.equal(y, labels[sample_indices(labels, 50, 3)]) and "class-balanced, seed 3" in words
    again, _, _ = spatial_maps.balanced_images(ck, 50, seed=3)
    other, _, _ = spatial_maps.balanced_images(ck, 50, seed=4)
    assert torch.equal(x, again) and not torch.equal(x, other)
    assert not torch.equal(x, images[:50])


def test_per_class_rows_and_tables(tmp_path):
    """Per true class, every method's mean with its CI, in the CSV and the printed tables; ``done`` reads the
    sample back for --resume."""
    labels = torch.tensor([0, 0, 0, 1, 1, 2])
    values = {"exact": torch.tensor([0.1, 0.2, 0.3, 0.5, 0.7, 0.9]), "Grad-CAM": torch.full((6,), 0.4)}
    rows = spatial_maps.class_stats(values, labels, ["cat", "dog", "owl"], resamples=200)
    by = {(r["class"], r["method"]): r for r in rows}
    assert set(by) == {(c, m) for c in ("cat", "dog", "owl") for m in values}
    assert by["cat", "exact"]["n"] == 3 and by["cat", "exact"]["mean"] == pytest.approx(0.2)
    assert by["dog", "exact"]["mean"] == pytest.approx(0.6) and by["owl", "exact"]["low"] == pytest.approx(0.9)
    assert all(r["low"] <= r["mean"] <= r["high"] for r in rows)
    base = {"checkpoint": "s/laya", "sample": "balanced seed 0", "layer": spatial_maps.ALL, "metric": "deletion"}
    pooled = [{**base, "method": m, **r} for m, r in spatial_maps.row_stats(values, "lower", 200).items()]
    path = tmp_path / "s-laya.csv"
    spatial_maps.write_csv([*pooled, *({**base, **r} for r in rows)], {}, path)
    tables = spatial_maps.markdown_tables(tmp_path)
    assert "(6 images, class-balanced random sample, seed 0; ties: pixels of equal map value" in tables
    assert "| dog | 2 | exact | 0.600 [" in tables and "| cat | 3 | Grad-CAM | 0.400 [0.400, 0.400] |" in tables
    assert not spatial_maps.done(path, 6, 0)  # no metric check: written before it, so --resume reruns it
    checks = [{**base, "metric": m, "n": 6, "method": spatial_maps.CHECK, "verdict": spatial_maps.DISCRIMINATES}
              for m in spatial_maps.METRICS]  # fmt: skip
    spatial_maps.write_csv([*pooled, *checks, *({**base, **r} for r in rows)], {}, path)
    assert spatial_maps.done(path, 6, 0) and not spatial_maps.done(path, 6, 1) and not spatial_maps.done(path, 7, 0)


@pytest.mark.slow  # about a minute on an idle core (several on a loaded machine)
def test_benchmark_smoke_on_two_images(tmp_path):
    """The script on 2 CNN images (LAYA; one anchor; few steps): one CSV whose rows and tables are complete."""
    out = tmp_path / "maps"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "spatial_maps.py"), "--checkpoints", "models/cifar10-cnn/laya",
           "--n", "2", "--steps", "4", "--fractions", "0.5", "--resamples", "50", "--cost-batch", "2",
           "--methods", "Grad-CAM", "--layers", "block 5", "--out", str(out)]  # fmt: skip
    result = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = list(csv.DictReader((out / "cifar10-cnn-laya.csv").open()))
    faith = [r for r in rows if r["metric"] in spatial_maps.METRICS and not r["class"] and r["method"] != spatial_maps.CHECK]
    assert {(r["layer"], r["method"]) for r in faith} == {
        (layer, method) for layer in ("block 5", spatial_maps.ALL) for method in ("exact", "Grad-CAM")
    } | {(spatial_maps.ALL, spatial_maps.RANDOM), (spatial_maps.ALL, spatial_maps.REFERENCE)}  # all-layer row only
    checks = [r for r in rows if r["method"] == spatial_maps.CHECK]  # one metric check per metric
    assert sorted(r["metric"] for r in checks) == sorted(spatial_maps.METRICS)
    assert all(r["verdict"] in (spatial_maps.DISCRIMINATES, spatial_maps.NOT_DISCRIMINATING) for r in checks)
    shares = {r["layer"]: r for r in rows if r["metric"] == spatial_maps.SHARE}
    assert shares["block 5"]["verdict"] == "constant over the frame" and shares["block 1"]["verdict"] == "orders pixels"
    for r in faith:
        assert r["n"] == "2" and float(r["low"]) <= float(r["mean"]) <= float(r["high"])
        if r["metric"] != "road":
            assert 0 <= float(r["mean"]) <= 1
        assert (r["verdict"] == "") == (r["method"] == "exact")
    cost = {r["method"]: float(r["mean"]) for r in rows if r["metric"] == "cost_x_forward"}
    assert set(cost) == {"exact", "Grad-CAM one layer", "Grad-CAM every layer"} and all(v > 0 for v in cost.values())
    tables = spatial_maps.markdown_tables(out)
    assert "| block 5 (1x1) | Grad-CAM |" in tables and "| cifar10-cnn/laya | Grad-CAM |" in tables
    assert tables in result.stdout


def test_a_metric_discriminates_only_where_the_reference_beats_random_in_its_direction():
    """``check_row``: occlusion minus random, paired; deletion (lower is better) needs a CI below 0, insertion and
    ROAD a CI above 0; a tie or the wrong direction does not discriminate."""
    g = torch.Generator().manual_seed(0)
    noise = torch.rand(200, generator=g) * 0.1
    low, high = {"occlusion": 0.2 + noise, "random": 0.5 + noise}, {"occlusion": 0.5 + noise, "random": 0.2 + noise}
    same = {"occlusion": noise, "random": noise.flip(0)}
    assert spatial_maps.check_row(low, "lower", 200)["verdict"] == spatial_maps.DISCRIMINATES
    assert spatial_maps.check_row(low, "higher", 200)["verdict"] == spatial_maps.NOT_DISCRIMINATING  # random wins
    assert spatial_maps.check_row(high, "higher", 200)["verdict"] == spatial_maps.DISCRIMINATES
    assert spatial_maps.check_row(high, "lower", 200)["verdict"] == spatial_maps.NOT_DISCRIMINATING
    row = spatial_maps.check_row(same, "higher", 200)
    assert row["verdict"] == spatial_maps.NOT_DISCRIMINATING and row["diff_low"] <= 0 <= row["diff_high"]
    assert row["method"] == spatial_maps.CHECK and row["n"] == 200


def test_layer_shares_name_the_layers_that_order_pixels():
    """A 1x1 layer resampled to the frame is constant (rounding aside) and orders no pixel; the shares sum to 1."""
    big = spatial_maps.to_frame(torch.full((3, 1, 1), 2.0, dtype=torch.float64), 8) / 64
    small = torch.rand(3, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 1e-9
    shares = spatial_maps.layer_shares({"block 1": small, "block 2": big, spatial_maps.ALL: big + small})
    assert set(shares) == {"block 1", "block 2"}
    assert shares["block 1"][1] and not shares["block 2"][1]
    assert shares["block 1"][0] == pytest.approx(float(small.abs().sum((1, 2)).mean()) / 2, rel=1e-6) and sum(s for s, _ in shares.values()) == pytest.approx(1.0)


def test_tables_show_random_as_a_row_and_no_verdict_on_a_metric_that_does_not_discriminate(tmp_path):
    base = {"checkpoint": "s/laya", "sample": "balanced seed 0", "layer": spatial_maps.ALL}
    g = torch.Generator().manual_seed(1)
    values = {m: torch.rand(30, generator=g) for m in ("exact", "Grad-CAM", "occlusion", "random")}
    values["occlusion"] = values["random"] + 0.3  # higher: insertion discriminates, deletion (lower is better) does not
    rows = []
    for metric, better in (("deletion", "lower"), ("insertion", "higher")):
        rows += [{**base, "metric": metric, "method": m, **r} for m, r in spatial_maps.row_stats(values, better, 200).items()]
        rows.append({**base, "metric": metric, **spatial_maps.check_row(values, better, 200)})
    spatial_maps.write_csv(rows, {}, tmp_path / "s-laya.csv")
    tables = spatial_maps.markdown_tables(tmp_path)
    assert "| all layers | random |" in tables and "| all layers | occlusion |" in tables
    assert "deletion +0.300 [+0.300, +0.300]: does not discriminate here" in tables
    assert "insertion +0.300 [+0.300, +0.300]: discriminates" in tables
    tally = next(line for line in tables.splitlines() if line.startswith("| s/laya | Grad-CAM |"))
    assert tally.split(" | ")[2] == "does not discriminate here" and "/" in tally.split(" | ")[3]
    works = spatial_maps.discriminating(rows)
    assert works == {("s/laya", "deletion"): False, ("s/laya", "insertion"): True}
