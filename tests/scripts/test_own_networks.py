"""scripts/own_networks.py: the same-class pair check, its table from the committed checks, and the page's blocks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.scripts.test_prose_claims import _load, claims

own = _load("own_networks")
ROOT = Path(__file__).resolve().parents[2]
CHECKS = ROOT / "docs" / "own-networks"


def test_profiles_that_differ_by_one_constant_do_not_count_as_different():
    """Two inputs of class 0 whose drops differ by one constant (what a mean-ablated stage that is not residual
    gives), and two of class 1 that differ unit by unit: one pair of each kind."""
    drops = torch.tensor([[0.5, 0.2, 0.1], [0.7, 0.4, 0.3], [0.5, 0.2, 0.1], [0.1, 0.6, 0.2]], dtype=torch.float64)
    predictions = torch.tensor([0, 0, 1, 1])
    assert own.pair_shares(drops, predictions) == {"pairs": 2, "differ": 1}
    assert own.pair_shares(drops, torch.tensor([0, 1, 2, 3])) == {"pairs": 0, "differ": 0}


def test_a_bar_is_shared_where_the_drops_differ_by_the_probabilities_alone():
    """Two inputs of class 0 whose drops at unit 1 differ by exactly ``p1 - p2`` (a unit whose whole output is
    replaced) share that bar; units that do not keep the input are not counted."""
    drops = torch.tensor([[0.5, 0.2, 0.1], [0.4, 0.1, 0.3], [0.5, 0.2, 0.1]], dtype=torch.float64)
    probability = torch.tensor([0.9, 0.8, 0.7], dtype=torch.float64)
    predictions = torch.tensor([0, 0, 1])
    assert own.shared_bars(drops, probability, predictions, [True, True, True]) == {"pairs": 1, "units": 3,
                                                                                     "shared": 2}  # fmt: skip
    assert own.shared_bars(drops, probability, predictions, [False, False, True]) == {"pairs": 1, "units": 1,
                                                                                       "shared": 0}  # fmt: skip


def test_rounding_to_float16_is_what_ships(tmp_path: Path):
    from safetensors.torch import load_file, save_file

    save_file({"w": torch.tensor([0.1, 1 / 3]), "n": torch.tensor(7)}, tmp_path / "a.safetensors")
    own.rounded(tmp_path / "a.safetensors", tmp_path / "b.safetensors")
    out = load_file(tmp_path / "b.safetensors")
    assert out["w"].dtype == torch.float16 and out["n"].dtype == torch.int64
    assert torch.equal(out["w"], torch.tensor([0.1, 1 / 3]).half())


def test_the_package_is_compared_on_the_module_that_writes_a_unit_last():
    import timm

    network = timm.create_model("resnet18", num_classes=10, channels=[8, 16, 32, 64], stem_width=8).eval()
    writers = own.last_writers(network, torch.randn(1, 3, 64, 64), ["bn1", "layer1.0", "layer4.1"])
    assert writers == {"bn1": "act1", "layer1.0": "layer1.0", "layer4.1": "layer4.1"}  # act1: ReLU(inplace=True)


def test_the_table_reads_every_committed_check_and_a_changed_count_changes_it(tmp_path: Path):
    rows = sorted(CHECKS.glob("*.json"))
    assert {p.stem for p in rows} >= {"resnet18", "vit"}  # the two networks the issue names
    text = own.markdown(CHECKS)
    assert len([line for line in text.splitlines() if line.startswith("| ") and "network |" not in line]) == len(rows)
    record = json.loads(rows[0].read_text())
    record["pairs"]["resample"]["differ"] -= 1
    (tmp_path / rows[0].name).write_text(json.dumps(record))
    assert f"{record['pairs']['resample']['differ']} of {record['pairs']['resample']['pairs']}" in own.markdown(tmp_path)


@pytest.mark.parametrize("path", sorted(CHECKS.glob("*.json")), ids=lambda p: p.stem)
def test_each_committed_check_meets_the_issue(path: Path):
    """Done when: same-class inputs differ under the default intervention, the tuned lens at the last unit gives
    the network's class on at least 99 % of the test split, Grad-CAM equals the package's to 1e-5."""
    record = json.loads(path.read_text())
    resample = record["pairs"]["resample"]
    assert resample["pairs"] > 0 and resample["differ"] == resample["pairs"]
    assert record["lens"]["agree"] >= 0.99 * record["lens"]["n"] and record["lens"]["n"] == record["test_n"]
    assert record["gradcam"]["max_abs_diff"] < 1e-5
    if "shared" in record:  # checks written since units with a projection shortcut keep the input
        assert record["shared"]["pairs"] > 0 and record["shared"]["shared"] == 0
    stored = record["network_report"]  # the report's lesion study and Grad-CAM test, as the docs quote them
    assert stored["units"] == record["units"] and stored["lesion"]["n"] == record["sample"]
    assert {r["unit"] for r in stored["lesion"]["single"]} == set(record["units"])
    assert [u["unit"] for u in stored["gradcam"]["units"]] == record["units"]


def test_the_page_blocks_are_generated_from_the_checks():
    page = (ROOT / "docs" / "trained-networks.md").read_text()
    for spec in ("own-networks docs/own-networks", "own-agreement resnet18", "own-agreement vit",
                 *(f"{kind} docs/own-networks/{name}.json" for kind in ("network-lesion", "gradcam-choice")
                   for name in ("resnet18", "vit"))):  # fmt: skip
        assert f"<!-- generated: {spec} -->\n{claims.generate(spec)}<!-- /generated -->" in page, spec
