"""scripts/spatial_facts.py: the pixel benchmark's sentences follow its CSVs (verdict words, sample, warning)."""

import csv
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
facts = pytest.importorskip("spatial_facts")
FIELDS = ["checkpoint", "sample", "layer", "grid", "method", "metric", "class", "n", "mean", "low", "high", "diff",
          "diff_low", "diff_high", "p", "verdict"]  # fmt: skip


def _write(folder: Path, name: str, verdicts: dict[str, str], balanced: bool, p: float = 0.001,
           silent: tuple[str, ...] = (), checked: bool = True, shares: dict[str, tuple[float, str, str]] | None = None) -> None:  # fmt: skip
    """One checkpoint's CSV: the all-layer and block 1 rows of exact and Grad-CAM per metric, given verdicts
    (``p``: every comparison's uncorrected p); the metric check (occlusion vs random) per metric where ``checked``,
    the metrics in ``silent`` failing it (random better than the reference); ``shares``: layer -> (share, grid,
    verdict) rows of ``layer_share``."""
    rows = []
    for metric in verdicts if checked else ():
        sign = (1 if metric == "deletion" else -1) * (1 if metric in silent else -1)  # deletion: lower is better
        base = {"checkpoint": name, "sample": "balanced seed 3" if balanced else "", "layer": "all layers",
                "metric": metric, "n": 40, "method": "occlusion vs random"}  # fmt: skip
        rows.append({**base, "diff": 0.1 * sign, "diff_low": 0.1 * sign - 0.05, "diff_high": 0.1 * sign + 0.05,
                     "p": 0.001, "verdict": "does not discriminate here" if metric in silent else "discriminates"})  # fmt: skip
    for layer, (share, grid, verdict) in (shares or {}).items():
        rows.append({"checkpoint": name, "layer": layer, "grid": grid, "method": "exact", "metric": "layer_share",
                     "n": 40, "mean": share, "verdict": verdict})  # fmt: skip
    sample = "balanced seed 3" if balanced else ""
    for layer in ("block 1", "all layers"):
        for metric, verdict in verdicts.items():
            diff = {"exact better": -0.1, "tie": 0.01, "exact worse": 0.1}[verdict] * (1 if metric == "deletion" else -1)
            low, high = (diff - 0.05, diff + 0.05) if verdict != "tie" else (-0.04, 0.06)
            base = {"checkpoint": name, "sample": sample, "layer": layer, "metric": metric, "n": 40}
            rows += [{**base, "method": "exact", "mean": 0.5, "low": 0.4, "high": 0.6},
                     {**base, "method": "Grad-CAM", "mean": 0.5 - diff, "low": 0.4, "high": 0.6, "diff": diff,
                      "diff_low": low, "diff_high": high, "p": p, "verdict": verdict}]  # fmt: skip
    if balanced:  # per-class rows: exact best on deletion in class a only
        for cls, exact, anchor in (("a", 0.2, 0.3), ("b", 0.4, 0.3)):
            base = {"checkpoint": name, "sample": sample, "layer": "all layers", "metric": "deletion", "class": cls, "n": 20}
            rows += [{**base, "method": "exact", "mean": exact, "low": 0, "high": 1},
                     {**base, "method": "Grad-CAM", "mean": anchor, "low": 0, "high": 1}]  # fmt: skip
    with (folder / f"{name.replace('/', '-')}.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        writer.writerows(rows)


def test_the_words_are_the_csvs_verdicts(tmp_path: Path):
    _write(tmp_path, "s/laya", {"deletion": "exact worse", "insertion": "tie", "road": "exact better"}, balanced=True)
    verdicts = facts.spatial_facts(tmp_path, "verdicts")
    assert "deletion loses (+0.100 [+0.050, +0.150])" in verdicts and "insertion ties (" in verdicts
    assert "ROAD wins (+0.100 [+0.050, +0.150])" in verdicts
    assert "40 test images, class-balanced random sample, seed 3" in verdicts
    assert "best mean in: deletion 1 of 2, insertion 0 of 0, ROAD 0 of 0 classes" in verdicts
    assert ("deletion 0 / 0 / 1 (discriminates on 1 of 1 checkpoint); insertion 0 / 1 / 0 (discriminates on 1 of 1 "
            "checkpoint); ROAD 1 / 0 / 0 (discriminates on 1 of 1 checkpoint) (paired") in facts.spatial_facts(tmp_path, "headline")
    assert "warning" not in facts.spatial_facts(tmp_path, "sample")


def test_the_words_are_holm_corrected_over_the_checkpoints_comparisons(tmp_path: Path):
    """Six comparisons at p = 0.01 each: every CI excludes 0, but Holm's smallest adjusted p is 0.06, so none has a
    direction (uncorrected, deletion would read "loses" and ROAD "wins")."""
    _write(tmp_path, "s/laya", {"deletion": "exact worse", "insertion": "tie", "road": "exact better"}, balanced=True,
           p=0.01)  # fmt: skip
    verdicts = facts.spatial_facts(tmp_path, "verdicts")
    assert "deletion ties (+0.100 [+0.050, +0.150])" in verdicts and "ROAD ties (" in verdicts
    assert ("deletion 0 / 1 / 0 (discriminates on 1 of 1 checkpoint); insertion 0 / 1 / 0 (discriminates on 1 of 1 "
            "checkpoint); ROAD 0 / 1 / 0 (discriminates on 1 of 1 checkpoint) (paired") in facts.spatial_facts(tmp_path, "headline")
    assert "Holm-corrected" in facts.spatial_facts(tmp_path, "headline")


def test_an_old_csv_is_named_in_a_warning_and_a_missing_one_says_nothing(tmp_path: Path):
    _write(tmp_path, "s/laya", {"deletion": "exact better", "insertion": "tie", "road": "tie"}, balanced=True)
    _write(tmp_path, "old/laya", {"deletion": "exact better", "insertion": "tie", "road": "tie"}, balanced=False)
    sample = facts.spatial_facts(tmp_path, "sample")
    assert '!!! warning "Not a class-balanced measurement"' in sample and "The CSVs of old/laya state no" in sample
    assert facts.spatial_facts(tmp_path, "verdicts", "vit-avg/*") == ""
    assert facts.spatial_facts(tmp_path / "none", "headline") == "" and facts.spatial_facts(tmp_path / "none", "cost") == ""
    with pytest.raises(ValueError, match="unknown spatial-facts topic 'nope'"):
        facts.spatial_facts(tmp_path, "nope")


def test_a_metric_that_ranks_random_first_gives_no_verdicts(tmp_path: Path):
    """Deletion fails the check (random beats the occlusion reference): no word, tally or per-class count of it, here
    or in the headline, and the Holm family shrinks to the metrics that discriminate."""
    verdicts = {"deletion": "exact worse", "insertion": "tie", "road": "exact better"}
    _write(tmp_path, "s/laya", verdicts, balanced=True, p=0.01, silent=("deletion",))
    text = facts.spatial_facts(tmp_path, "verdicts")
    assert "deletion loses" not in text and "deletion +0.100 [+0.050, +0.150], does not discriminate here" in text
    assert "No verdicts: deletion does not discriminate here." in text and "best mean in: deletion" not in text
    # Holm over the 4 comparisons left: 4 × 0.01 = 0.04, so ROAD keeps its direction (over all 6 it would not)
    assert "ROAD wins (+0.100 [+0.050, +0.150])" in text
    head = facts.spatial_facts(tmp_path, "headline")
    assert "deletion no verdicts (discriminates on 0 of 1 checkpoint)" in head
    assert "ROAD 1 / 0 / 0 (discriminates on 1 of 1 checkpoint)" in head
    # the same CSV with deletion discriminating: the deletion comparison is counted again (the check can fail)
    _write(tmp_path, "s/laya", verdicts, balanced=True, p=0.01)
    assert "deletion no verdicts" not in facts.spatial_facts(tmp_path, "headline")


def test_a_csv_without_the_check_states_no_verdict(tmp_path: Path):
    _write(tmp_path, "s/laya", {"deletion": "exact worse", "insertion": "tie", "road": "tie"}, balanced=True,
           checked=False)  # fmt: skip
    text = facts.spatial_facts(tmp_path, "verdicts")
    assert "No metric check in its CSV" in text and "loses" not in text and "ties" not in text
    assert "No metric check in the CSVs of s/laya" in facts.spatial_facts(tmp_path, "headline")


def test_the_weights_note_follows_the_layer_shares(tmp_path: Path):
    """The note appears where the layers that order pixels carry < 1e-3 of the map, and not otherwise."""
    shares = {"block 1": (2e-7, "4x4", "orders pixels"), "block 2": (3e-7, "2x2", "orders pixels"),
              "block 3": (0.9999995, "1x1", "constant over the frame")}  # fmt: skip
    _write(tmp_path, "s/laya", {"deletion": "tie"}, balanced=True, shares=shares)
    note = facts.spatial_facts(tmp_path, "weights")
    assert "**s/laya**: the all-layer exact map's pixel order comes from block 1, block 2, whose terms carry 5e-07" in note
    assert "block 3 (1x1 grid), constant over the frame, carries the rest" in note
    shares["block 2"] = (0.4, "2x2", "orders pixels")
    _write(tmp_path, "s/laya", {"deletion": "tie"}, balanced=True, shares=shares)
    note = facts.spatial_facts(tmp_path, "weights")
    assert "pixel order comes from" not in note and "carry at least 0.001 of the map's mass on: s/laya 0.4" in note


def test_a_map_constant_over_the_frame_is_named_as_ordering_no_pixel(tmp_path: Path):
    _write(tmp_path, "s/lastlayer", {"deletion": "tie"}, balanced=True,
           shares={"block 3": (1.0, "1x1", "constant over the frame")})  # fmt: skip
    note = facts.spatial_facts(tmp_path, "weights")
    assert "**s/lastlayer**: every layer's exact map is constant over the frame (block 3 1x1)" in note
    assert "carry at least" not in note
