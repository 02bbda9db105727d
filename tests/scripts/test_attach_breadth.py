"""scripts/attach_breadth.py: its table and verdict from a result file, the committed file against its list, and
docs/attach-breadth.md's generated blocks against the committed file."""

from __future__ import annotations

import json
from pathlib import Path

from tests.scripts.test_prose_claims import _load, claims

breadth = _load("attach_breadth")
ROOT = Path(__file__).resolve().parents[2]
RESULT = ROOT / "docs" / "attach-breadth" / "attach_breadth.json"
PAGE = ROOT / "docs" / "attach-breadth.md"


def _row(name: str, family: str, model: str, status: str, **more) -> dict:
    return {"name": name, "family": family, "model": model, "size": 224, "kwargs": {}, "layers": None,
            "note": "native", "status": status, "error": "", **more}  # fmt: skip


def _fixture(tmp_path: Path) -> Path:
    attached = _row("timm-resnet18", "timm", "resnet18", "attached", seconds=58.2, attach_s=52.1, params=11_178_564,
                    layer_names=["stage 1", "stage 2", "pre-logits"], compared=16, max_abs_diff=0.0,
                    max_abs_logit=0.106, same_top1=True, within_tolerance=True)  # fmt: skip
    refused = _row("torchvision-squeezenet1_0", "torchvision", "squeezenet1_0", "refused", seconds=9.6, attach_s=4.0,
                   params=736_450, error="SqueezeNet has no nn.Linear classifier | a network that ends in one")
    off = _row("transformers-vit", "transformers", "vit", "attached", kwargs={"hidden_size": 192}, seconds=30.4,
               attach_s=25.0, params=5_000_000, layer_names=["block 1", "pre-logits"], compared=16,
               max_abs_diff=2.5e-5, max_abs_logit=3.1, same_top1=True, within_tolerance=False)  # fmt: skip
    run = {"architectures": 4, "tolerance": 1e-5, "threads": 2, "cpus": 2, "load_average": [3.2, 5.6],
           "versions": {"torch": "2.0", "timm": "1.0", "torchvision": "0.2", "transformers": "5.0"},
           "flags": ["--max-epochs", "1"], "data": {"classes": 4, "train_per_class": 8, "test_per_class": 4, "side": 224},
           "results": [attached, refused, off, _row("wrapped-plain-cnn", "wrapped", "plain-cnn", "not run")]}  # fmt: skip
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    return path


def test_a_result_file_gives_its_table_and_verdict(tmp_path: Path) -> None:
    path = _fixture(tmp_path)
    lines = breadth.table(json.loads(path.read_text())).splitlines()
    assert lines[2:] == [
        "| timm | `resnet18` | 224 px, native | attached | ✓ 0.0e+00 (16 images, logits up to 0.11) | 3 | — | 11.2 M | 52 / 58 | — |",
        "| torchvision | `squeezenet1_0` | 224 px, native | refused | — | — | — | 0.7 M | 4 / 10 | SqueezeNet has no nn.Linear "
        "classifier \\| a network that ends in one |",
        '| transformers | `vit {"hidden_size":192}` | 224 px, native | attached | ✗ 2.5e-05 (16 images, logits up to 3.1) '
        "| 2 | — | 5.0 M | 25 / 30 | — |",
        "| wrapped | `plain-cnn` | 224 px, native | not run | — | — | — | — | — | — |",
    ]  # fmt: skip
    assert len(lines[0].split(" | ")) == len(lines[2].split(" | "))  # as many cells as columns
    assert breadth.summary(path) == (
        "**Verdict:** `laya attach` attached 2 of the 3 architectures run (timm 1 of 1, torchvision 0 of 1, "
        "transformers 1 of 1); the own head's logits equal the network's within 1e-5 on 1 of the 2 compared (largest "
        "difference 2.5e-05); not attached: torchvision-squeezenet1_0 refused; not run yet: 1 (wrapped 1) "
        "(`docs/attach-breadth/attach_breadth.json`).\n"
    )
    assert "3 of 4 architectures run, 98 s in all on 2 torch threads, load average 3 to 6 on 2 cores" in breadth.markdown(path)


def test_an_error_s_text_is_plain_its_message_or_the_traceback_s_last_line_or_the_signal() -> None:
    refusal = "attach x:  14%|█▍ | 1/7 [00:01<00:08]\rerror: timm model 'x' cannot take 64x64 inputs\n"
    assert breadth.error_text(refusal, 2) == "timm model 'x' cannot take 64x64 inputs"
    assert not breadth.started(refusal.replace("attach x:", "checking"), "x") and breadth.started(refusal, "x")
    crash = 'Traceback (most recent call last):\n  File "a.py", line 1\nValueError: collected 4 maps for 5 layers\n'
    bars = ("decoding data/train:   0%|          | 0/1 [00:00<?, ?batch/s]\x1b[A\n                \x1b[A\n"
            "features (train split): 100%|██████████| 1/1 [00:01<00:00,  1.64s/it]\x1b[A\n      [A\n")  # fmt: skip
    assert breadth.error_text(crash + bars, 1) == "ValueError: collected 4 maps for 5 layers"
    assert breadth.error_text("epoch 1 loss 1.09\n" + bars, -9) == "killed by SIGKILL (out of memory, most likely)"
    assert breadth.error_text(bars, 1) == "no error text (the process ended without one)"


def test_the_list_covers_the_four_families_and_the_committed_file_every_architecture() -> None:
    families = {a.family for a in breadth.ARCHITECTURES.values()}
    assert len(breadth.ARCHITECTURES) >= 40 and families == {"timm", "torchvision", "transformers", "wrapped"}
    run = json.loads(RESULT.read_text())
    assert [r["name"] for r in run["results"]] == list(breadth.ARCHITECTURES)
    for r in run["results"]:
        assert r["status"] in ("attached", "refused", "failed", "not run"), r["name"]
        assert r["status"] != "refused" or r["error"], r["name"]  # a refusal keeps its text
        if r["status"] == "attached":  # the own head is the network: the same logits within 1e-5
            assert r["within_tolerance"] and r["max_abs_diff"] <= breadth.TOLERANCE, r["name"]


def test_the_page_shows_the_committed_file() -> None:
    page = PAGE.read_text()
    for spec in ("attach-breadth docs/attach-breadth/attach_breadth.json summary",
                 "attach-breadth docs/attach-breadth/attach_breadth.json"):  # fmt: skip
        block = page.split(f"<!-- generated: {spec} -->\n")[1].split("<!-- /generated -->")[0]
        assert block == claims.generate(spec), f"stale block {spec!r}: python scripts/prose_claims.py --write"
    rows = [line for line in page.splitlines() if line.startswith("| ") and " px, " in line]
    assert len(rows) == len(breadth.ARCHITECTURES)
