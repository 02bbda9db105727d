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


def _write(folder: Path, name: str, verdicts: dict[str, str], balanced: bool, p: float = 0.001) -> None:
    """One checkpoint's CSV: the all-layer and block 1 rows of exact and Grad-CAM per metric, given verdicts
    (``p``: every comparison's uncorrected p)."""
    rows = []
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
    assert "deletion 0 / 0 / 1; insertion 0 / 1 / 0; ROAD 1 / 0 / 0 (paired" in facts.spatial_facts(tmp_path, "headline")
    assert "warning" not in facts.spatial_facts(tmp_path, "sample")


def test_the_words_are_holm_corrected_over_the_checkpoints_comparisons(tmp_path: Path):
    """Six comparisons at p = 0.01 each: every CI excludes 0, but Holm's smallest adjusted p is 0.06, so none has a
    direction (uncorrected, deletion would read "loses" and ROAD "wins")."""
    _write(tmp_path, "s/laya", {"deletion": "exact worse", "insertion": "tie", "road": "exact better"}, balanced=True,
           p=0.01)  # fmt: skip
    verdicts = facts.spatial_facts(tmp_path, "verdicts")
    assert "deletion ties (+0.100 [+0.050, +0.150])" in verdicts and "ROAD ties (" in verdicts
    assert "deletion 0 / 1 / 0; insertion 0 / 1 / 0; ROAD 0 / 1 / 0 (paired" in facts.spatial_facts(tmp_path, "headline")
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
