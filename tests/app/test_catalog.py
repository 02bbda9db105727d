import json
import shutil
from pathlib import Path

from laya.app.catalog import Entry, backbone_label, catalog_table, example_images, find_checkpoints, group_entries
from laya.data.datasets import dataset_label
from tests.analysis.depth.test_measured import exit_run


def test_finds_bundled_layout_with_reports(tiny_models):
    entries = find_checkpoints(tiny_models)
    assert [e.head for e in entries] == ["lastlayer", "concat", "scalarmix", "laya"]
    assert all(e.error is None and e.accuracy is not None for e in entries)
    assert entries[3].faithfulness is not None and entries[0].group == entries[3].group
    assert len(catalog_table(entries)) == 4
    assert [p.name for p in example_images(entries[0].path)] == ["00-blue.png", "01-green.png", "02-red.png"]


def test_damaged_checkpoints_are_listed_with_their_error(tmp_path):
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "model.json").write_text("{oops")
    (tmp_path / "broken" / "model.safetensors").write_bytes(b"")
    [entry] = find_checkpoints(tmp_path)
    assert entry.error and "not valid JSON" in entry.error
    assert find_checkpoints(tmp_path / "does-not-exist") == []


def test_backbone_labels():
    assert backbone_label({"name": "mlp", "widths": [512, 256]}) == "mlp 512-256"
    assert (
        backbone_label({"name": "timm", "model": "efficientnet_lite0", "freeze": True}) == "efficientnet_lite0 (frozen)"
    )


def test_damaged_report_keeps_the_checkpoint_usable(tiny_models, tmp_path):
    copy = tmp_path / "models" / "colours-mlp" / "laya"
    shutil.copytree(tiny_models / "colours-mlp" / "laya", copy)
    (copy / "report.json").write_text("{broken")
    [entry] = find_checkpoints(tmp_path / "models")
    assert entry.error is None and "not valid JSON" in entry.report_error
    assert entry.faithfulness is None and entry.accuracy is not None  # test accuracy recorded at training time


def test_dataset_labels_are_short():
    assert dataset_label("fashion-mnist") == "fashion-mnist"
    assert dataset_label("/data/art/wikiart-styles") == "wikiart-styles"


def test_paper_settings_come_first_in_their_order_then_other_folders(tiny_models, tmp_path):
    for folder in ["aaa-own-model", "cifar10-vit", "fashion-mnist-mlp"]:
        shutil.copytree(tiny_models / "colours-mlp" / "laya", tmp_path / folder / "laya")
    folders = [e.path.parent.name for e in find_checkpoints(tmp_path)]
    assert folders == ["fashion-mnist-mlp", "cifar10-vit", "aaa-own-model"]  # the first is the dashboard's default


def test_measured_exits_add_compute_saved_and_the_estimate_does_not(tiny_models, tmp_path):
    copy = tmp_path / "models" / "colours-mlp" / "laya"
    shutil.copytree(tiny_models / "colours-mlp" / "laya", copy)
    assert find_checkpoints(tmp_path / "models")[0].compute_saved is None
    (copy / "depth.json").write_text(json.dumps({"early_exit": {"at_1pt": {"saved": 0.25}}}))
    assert find_checkpoints(tmp_path / "models")[0].compute_saved is None  # an estimate is not a saving
    runs = [exit_run("readout", "full model", None, 0.90, 0.0, 0.0, 1.0),
            exit_run("readout", "confidence 0.9", 0.9, 0.895, 0.3, 0.1, 1.0),
            exit_run("readout", "confidence 0.5", 0.5, 0.80, 0.6, 0.2, 1.0),
            exit_run("trained mlp", "full model", None, 0.90, 0.0, 0.0, 1.0),
            exit_run("trained mlp", "confidence 0.9", 0.9, 0.90, 0.1, 0.0, 1.0)]  # fmt: skip
    (copy / "exits.json").write_text(json.dumps({"command": "laya exits", "n_test": 100, "runs": runs}))
    [entry] = find_checkpoints(tmp_path / "models")
    assert entry.compute_saved == 0.3 and catalog_table([entry])["exit saves MACs (≤ 1 pt, measured)"].item() == 0.3
    for broken in ("{broken", json.dumps({"command": "laya exits", "n_test": 100, "runs": runs[1:]})):  # no full model
        (copy / "exits.json").write_text(broken)
        assert find_checkpoints(tmp_path / "models")[0].compute_saved is None


def test_group_entries_keeps_readable_entries_in_catalog_order(tiny_models):
    entries = find_checkpoints(tiny_models)
    broken = Entry(Path("/x/broken"), "unreadable", "?", "?", "?", None, None, None, error="damaged")
    groups = group_entries([*entries, broken])
    assert list(groups) == [entries[0].group]
    assert [e.head for e in groups[entries[0].group]] == ["lastlayer", "concat", "scalarmix", "laya"]
