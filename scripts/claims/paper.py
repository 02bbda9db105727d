"""The paper's claims against the bundled suites: ``paper-claims models``, one table row per claim.

Accuracy claims read ``models/<setting>/comparisons.csv`` (paired t-tests over seeds), Holm-corrected over the
three comparisons of LAYA with the other heads in each setting; the faithfulness claim reads ``results.csv``
(the paper's definition: all-layer Spearman under frozen-α ``zero``) and asks whether the paper's figure lies in
the t-interval over seeds.
"""

from __future__ import annotations

import pandas as pd

from claims.common import ROOT, holm, holm_reading
from claims.comparisons import DELTA
from laya.analysis.statistics import format_diff, seed_interval

NAMES = {"fashion-mnist-mlp": "Fashion-MNIST", "cifar10-cnn": "CNN", "cifar10-vit": "ViT",
         "cifar10-efficientnet-lite0": "EfficientNet"}  # fmt: skip
PAPER_FAITHFULNESS = 0.8575  # the paper's LAYA faithfulness on Fashion-MNIST (all-layer Spearman, zero ablation)


def _accuracy(setting: str) -> dict[str, tuple[str, str]]:
    """Per other head: (direction of LAYA − head after Holm, ``"-0.003 [-0.008, +0.001]"``)."""
    table = pd.read_csv(ROOT / "models" / setting / "comparisons.csv")
    rows = table[(table["comparison"] == "accuracy") & (table["A"] == "LAYA")]
    deltas = [tuple(map(float, DELTA.search(t).groups())) for t in rows["over seeds"]]
    adjusted = holm(rows["p (seeds)"].to_numpy(float))
    return {b: (holm_reading(d[1], d[2], p), format_diff(*d)) for b, d, p in zip(rows["B"], deltas, adjusted)}


def _cell(setting: str, found: dict[str, tuple[str, str]]) -> str:
    word = {"higher": "above", "lower": "below", "tie": "tie"}
    return f"{NAMES[setting]}: " + ", ".join(f"− {b} {d} ({word.get(w, w)})" for b, (w, d) in found.items())


def _highest(setting: str) -> tuple[str, str]:
    found = _accuracy(setting)
    held = all(w == "higher" for w, _ in found.values())
    return _cell(setting, found), "reproduced" if held else "not reproduced"


def _frozen() -> tuple[str, str]:
    found = _accuracy("cifar10-efficientnet-lite0")
    held = found["LastLayer"][0] == "higher" and found["Concat"][0] == "lower"
    return _cell("cifar10-efficientnet-lite0", found), "reproduced" if held else "not reproduced"


def _faithfulness() -> tuple[str, str]:
    results = pd.read_csv(ROOT / "models" / "fashion-mnist-mlp" / "results.csv")
    alpha = results[(results["head"] == "laya") & (results["mode"] == "zero") & (results["reduction"] == "signed")
                    & (results["method"] == "laya_alpha")]["spearman"].to_numpy()  # fmt: skip
    ci = seed_interval(alpha)
    inside = ci.low <= PAPER_FAITHFULNESS <= ci.high
    return (f"{len(alpha)} seeds: {ci.estimate:.3f} [{ci.low:.3f}, {ci.high:.3f}]",
            "reproduced (inside the interval)" if inside else "not reproduced (outside the interval)")


def paper_claims(arg: str) -> str:
    rows = [("LAYA has the highest accuracy on Fashion-MNIST", *_highest("fashion-mnist-mlp")),
            ("… and on CIFAR-10 (CNN)", *_highest("cifar10-cnn")),
            ("… and on CIFAR-10 (ViT)", *_highest("cifar10-vit")),
            ("Frozen backbone: Concat best, LAYA above LastLayer", *_frozen()),
            (f"LAYA faithfulness {PAPER_FAITHFULNESS} on Fashion-MNIST (all-layer Spearman, zero ablation)",
             *_faithfulness())]  # fmt: skip
    lines = ["| claim (paper) | here (LAYA − head, paired t-test over seeds, Holm over each setting's three) | verdict |",
             "|---|---|---|", *(f"| {c} | {h} | **{v}** |" for c, h, v in rows)]  # fmt: skip
    return "\n".join(lines) + "\n"


CLAIMS = {"paper-claims": paper_claims}
