import json
import re

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import save_file

from laya.analysis.evaluate import EvalOptions
from laya.data.datasets import load_dataset
from laya.model.backbones import BackboneConfig, build_backbone
from laya.model.checkpoint import load_checkpoint
from laya.training.bundle import (
    BACKBONE_FILE,
    EXPECTED_FILE,
    bundle,
    export_examples,
    model_card,
    refresh_setting,
    stale_posthoc_note,
    summary_seeds,
    update_model_card,
)
from laya.training.suite import seed0_posthoc_shift
from laya.training.train import train
from tests.conftest import tiny_config


def test_export_examples_one_per_class(image_folder, tmp_path):
    test = load_dataset(str(image_folder), "test", image_size=8)
    paths = export_examples(test, tmp_path, per_class=2)
    assert [p.name for p in paths] == [
        "00-blue.png",
        "01-blue.png",
        "02-green.png",
        "03-green.png",
        "04-red.png",
        "05-red.png",
    ]


def test_bundle_of_a_frozen_backbone_stores_it_once(image_folder, tmp_path):
    torch.manual_seed(0)
    source = build_backbone(BackboneConfig(name="timm", model="test_resnet", in_channels=3, input_size=16))
    save_file({k: v.contiguous() for k, v in source.model.state_dict().items()}, str(tmp_path / "w.safetensors"))
    test = load_dataset(str(image_folder), "test", image_size=8)
    setting = tmp_path / "models" / "colours-resnet"
    export_examples(test, setting / "examples")
    for head in ("laya", "concat"):
        backbone = BackboneConfig(
            name="timm", model="test_resnet", input_size=16, weights=str(tmp_path / "w.safetensors"), freeze=True
        )
        run = train(tiny_config(image_folder, tmp_path / "runs" / head, head, backbone=backbone, max_epochs=1))
        bundle(run, setting / head, test, EvalOptions(ig_steps=4))
    (tmp_path / "w.safetensors").unlink()  # the bundle no longer needs the original file
    assert (setting / BACKBONE_FILE).is_file()
    for head in ("laya", "concat"):
        meta = json.loads((setting / head / "model.json").read_text())
        assert meta["backbone"]["weights"] == f"../{BACKBONE_FILE}"
        assert (setting / head / "model.safetensors").stat().st_size < (setting / BACKBONE_FILE).stat().st_size
        ck = load_checkpoint(setting / head)
        expected = json.loads((setting / head / EXPECTED_FILE).read_text())
        assert sorted(expected) == ["00-blue.png", "01-green.png", "02-red.png"]
        assert (setting / head / "report.json").is_file()
        assert ck.meta.backbone.freeze
    card = model_card(tmp_path / "models")
    assert card.count("| colours-resnet |") == 2 and "| LAYA |" in card
    readme = tmp_path / "models" / "README.md"
    readme.write_text("# Models\n\nprose\n<!-- model-card:start -->\nstale\n<!-- model-card:end -->\nmore prose\n")
    text = update_model_card(tmp_path / "models").read_text()
    assert "stale" not in text and "prose" in text and "more prose" in text and card in text


def test_refresh_setting_keeps_a_multi_seed_summary(image_folder, tmp_path):
    test = load_dataset(str(image_folder), "test", image_size=8)
    setting = tmp_path / "colours-mlp"
    export_examples(test, setting / "examples")
    for head in ("laya", "lastlayer"):
        bundle(train(tiny_config(image_folder, tmp_path / "runs" / head, head, max_epochs=1)), setting / head, test,
               EvalOptions(ig_steps=2, resamples=100))  # fmt: skip
    options = EvalOptions(ig_steps=2, resamples=100)
    refresh_setting(setting, options)
    assert summary_seeds(setting) == 1  # rebuilt from the bundled (seed-0) reports
    summary = pd.read_csv(setting / "summary.csv").assign(seeds=3)  # as reproduce writes it over 3 seeds
    summary.to_csv(setting / "summary.csv", index=False)
    (setting / "summary.md").write_text("# three seeds\n")
    refresh_setting(setting, options)
    assert summary_seeds(setting) == 3 and (setting / "summary.md").read_text() == "# three seeds\n"
    assert summary_seeds(tmp_path) == 0
    # A kept summary whose results predate float64 gradients (no zero-baseline IG) says so under its title.
    results = pd.read_csv(setting / "results.csv")
    results[results["method"] != "integrated_gradients_zero"].to_csv(setting / "results.csv", index=False)
    refresh_setting(setting, options, resume=True)
    text = (setting / "summary.md").read_text()
    assert text.startswith("# three seeds\n\n<!-- stale-posthoc:start -->\n**Stale post-hoc numbers.**")
    assert "Re-evaluating seed 0 left every one of its post-hoc figures unchanged." in text  # same reports
    # A summary whose seed 0 differs from the bundled report: the largest shift is named, with where it is.
    moved = results[results["method"] != "integrated_gradients_zero"].copy()
    row = (moved["head"] == "laya") & (moved["method"] == "input_x_gradient") & (moved["mode"] == "mean")
    row &= moved["reduction"] == "signed"
    assert row.sum() == 1 and np.isfinite(moved.loc[row, "top1"]).all()
    moved.loc[row, "top1"] += 0.25
    moved.to_csv(setting / "results.csv", index=False)
    shift = seed0_posthoc_shift(setting)
    assert shift["shift"] == pytest.approx(0.25) and shift["metric"] == "top1" and shift["head"] == "laya"
    assert "moved its post-hoc figures by at most 0.25 (top-1 agreement, LAYA Gradient × Input, `mean`, signed)" in (
        stale_posthoc_note(setting)
    )
    results.to_csv(setting / "results.csv", index=False)  # rebuilt: the note goes
    refresh_setting(setting, options, resume=True)
    assert (setting / "summary.md").read_text() == "# three seeds\n"


def test_an_attached_setting_is_reproduced_by_its_attach_command_then_the_one_that_rewrote_its_report(tmp_path):
    """The model card's command: ``laya attach`` alone where its report is the attach's; where ``laya network``
    rewrote the report, the attach command it carried over (``setting_command``), then that one."""
    from laya.training.bundle import _command

    own = tmp_path / "net" / "own"
    own.mkdir(parents=True)
    (own / "network.json").write_text(json.dumps({"command": "laya attach --model m"}))
    assert _command(tmp_path / "net") == "python -m laya attach --model m"
    (own / "network.json").write_text(json.dumps({"command": "laya network --refit-lens",
                                                   "setting_command": "laya attach --model m"}))  # fmt: skip
    assert _command(tmp_path / "net") == "python -m laya attach --model m`, then `python -m laya network --refit-lens"
    assert _command(tmp_path / "paper") == "python -m laya reproduce paper"


def test_the_model_card_reads_network_json_as_an_untrusted_file(tmp_path):
    """``network.json`` for the model card went through ``json.loads(read_text())`` unbounded and unchecked
    (``record["command"]`` a KeyError, a link out followed): it is the attached files' reader now (issue 43)."""
    from laya.model.attached_files import AttachedFileError
    from laya.training.bundle import _command

    own = tmp_path / "net" / "own"
    own.mkdir(parents=True)
    for text, message in (('{"command": 3}', "network.json: command = 3: must be a text"),
                          ("[]", "network.json: command = []: must be a text"),
                          ('{"command": "laya attach", "setting_command": [1]}', "setting_command = [1]"),
                          ("{", "network.json is not valid JSON")):  # fmt: skip
        (own / "network.json").write_text(text)
        with pytest.raises(AttachedFileError, match=re.escape(message)):
            _command(tmp_path / "net")
    (tmp_path / "outside.json").write_text(json.dumps({"command": "laya attach --model m"}))
    (own / "network.json").unlink()
    (own / "network.json").symlink_to(tmp_path / "outside.json")
    with pytest.raises(AttachedFileError, match="network.json links outside its setting folder"):
        _command(tmp_path / "net")
