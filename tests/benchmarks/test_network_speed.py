"""The network views' speed block (docs/speed.md, ``network-speed docs/speed``): generated from the committed output of
benchmarks/unit_profile_speed.py and network_lens_speed.py, every verdict computed from a ratio and its budget, and
Captum's refusal of units that feed each other recorded as the benchmark meets it."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "scripts"))

import network_lens_speed  # noqa: E402
import unit_profile_speed  # noqa: E402
import prose_claims  # noqa: E402
from claims import speed  # noqa: E402

SPEED = ROOT / "docs" / "speed"


def test_the_committed_block_is_generated_from_the_committed_output():
    text = (ROOT / "docs" / "speed.md").read_text()
    block = text.split("<!-- generated: network-speed docs/speed -->\n", 1)[1].split("<!-- /generated -->", 1)[0]
    assert block == prose_claims.generate("network-speed docs/speed")
    runs = [json.loads((SPEED / name).read_text()) for name in speed.NETWORK_FILES]
    for run in runs:
        assert f"* `{run['command']}`: {run['date']}, commit {run['commit']}" in block
    rows = [r for run in runs for r in run["rows"]]
    assert {r["kind"] for r in rows} == {"profile", "lens", "gradcam", "captum"}  # every §7 ratio, Captum beside
    profiles = [r for r in rows if r["kind"] == "profile"]  # per setting and method: the first input and each further
    assert sorted((r["network"], r["size"], r["view"], r["references_recorded"]) for r in profiles) == sorted(
        (n, size, v, recorded) for n, _, size in unit_profile_speed.settings() for v in ("skip", "resample")
        for recorded in (0, 1))  # fmt: skip
    assert all((r["budget"] is None) != r["references_recorded"] for r in profiles)  # the budget: each further input
    table = [line for line in block.splitlines() if line.startswith("| ") and not line.startswith("| view")]
    refused = [r for r in rows if r["kind"] == "captum" and r["all_in_one_call"]["refused"]]
    assert len(table) == len(rows) + len(refused)


def _mutated(tmp_path: Path, ratios: dict[tuple[str, str], float]) -> str:
    """The block from a copy of the committed files with the ratios of the rows ``(network, view)`` replaced."""
    for name in speed.NETWORK_FILES:
        run = json.loads((SPEED / name).read_text())
        for row in run["rows"]:
            row["ratio"] = ratios.get((row["network"], row["view"]), row["ratio"])
        (tmp_path / name).write_text(json.dumps(run))
    return speed.network_speed(str(tmp_path))


def _row(block: str, network: str, view: str) -> list[str]:
    (line,) = [line for line in block.splitlines() if line.startswith(f"| {view}") and f"| {network}," in line]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_a_verdict_flips_when_the_ratio_crosses_its_budget(tmp_path):
    run = json.loads((SPEED / "network_lens_speed.json").read_text())
    row = next(r for r in run["rows"] if r["kind"] == "gradcam")
    network, budget = row["network"], row["budget"]
    below = _row(_mutated(tmp_path, {(network, "Grad-CAM"): budget - 0.01}), network, "Grad-CAM, every unit")
    assert below[-3:] == [f"{budget - 0.01:.2f}×", f"≤ {budget:g}×", "met"]
    above = _row(_mutated(tmp_path, {(network, "Grad-CAM"): budget + 0.01}), network, "Grad-CAM, every unit")
    assert above[-3:] == [f"{budget + 0.01:.2f}×", f"≤ {budget:g}×", "not met"]
    for name in ("page_costs.json", "load_test.json", "cold_open.json", "attach_at_size.json"):  # the goal list's
        shutil.copy(SPEED / name, tmp_path / name)
    over = f"(over it: {network} at {row['size']} px Grad-CAM"
    assert f"all-unit Grad-CAM ≤ {budget:g}× a forward: **not met** {over}" in speed.speed_goals(str(tmp_path))
    _mutated(tmp_path, {(network, "Grad-CAM"): budget})  # at the budget: met
    assert f"all-unit Grad-CAM ≤ {budget:g}× a forward: **met**" in speed.speed_goals(str(tmp_path))


def test_a_lens_view_below_one_forward_is_named_as_noise(tmp_path):
    rows = json.loads((SPEED / "network_lens_speed.json").read_text())["rows"]
    above = {(r["network"], r["view"]): 1.5 for r in rows if r["kind"] in speed.RUNS_A_FORWARD}
    assert "Below one forward" not in _mutated(tmp_path, above)
    network, view = next(key for key in above if key[1] == "tuned lens")
    block = _mutated(tmp_path, {**above, (network, view): 0.5})
    assert block.endswith(f"so timing noise of this machine: tuned lens, every unit on {network} (0.50×).\n")


def test_captum_refuses_units_in_sequence_and_the_benchmark_falls_back_to_one_call_per_unit():
    torch.manual_seed(0)
    network = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(),
                            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3)).eval()  # fmt: skip
    x = torch.randn(1, 3, 8, 8)
    call, outcome = network_lens_speed.captum_call(network, x, ["1", "3"])  # the second unit reads the first
    assert outcome["all_in_one_call"]["refused"].startswith("RuntimeError")
    assert any("Multiple layers" in w for w in outcome["all_in_one_call"]["warnings"])
    assert outcome["timed"] == "one call per unit" and outcome["steps"] == network_lens_speed.STEPS
    attributions = call()
    assert [a.shape for a in attributions] == [(1, 4, 8, 8), (1, 4, 8, 8)]


def test_resample_s_baseline_runs_k_rows_from_each_unit_on_and_its_prefix_alone():
    """``suffix_passes``: per unit, the modules after it see ``K`` rows and those up to it one; stopped, none after."""
    from laya.analysis.network.units import Unit
    from laya.analysis.patching import Block

    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.Linear(4, 3))
    seen: list[tuple[str, int]] = []
    for name, module in net.named_children():
        module.register_forward_hook(lambda m, args, out, name=name: seen.append((name, out.shape[0])))
    units = [Unit(name=n, stage="s", layer=0, block=Block(net.get_submodule(n), None)) for n in ("0", "2")]
    x = torch.randn(1, 4)
    unit_profile_speed.suffix_passes(net, x, units, rows=5)
    assert seen == [("0", 1), ("1", 5), ("2", 5), ("3", 5), ("0", 1), ("1", 1), ("2", 1), ("3", 5)]
    seen.clear()
    unit_profile_speed.suffix_passes(net, x, units, rows=5, stop=True)
    assert seen == [("0", 1), ("0", 1), ("1", 1), ("2", 1)]
    assert all(len(m._forward_hooks) == 1 for m in net)  # the passes' own hooks are gone
