"""Print a setting's results table (docs/results.md) and its stated comparisons, from its committed summary.

    python scripts/readme_tables.py models/cifar10-cnn [models/cifar10-vit ...]
    python scripts/readme_tables.py --overview models/fashion-mnist-mlp ...   # the results page's overview

The table is ``summary.csv`` (written by ``python -m laya reproduce``/``benchmark``) cut to the results
page's columns; the comparisons are ``comparisons.csv``'s verdicts (paired t-test over seeds, paired bootstrap over
the first seed's inputs); the depth lines are the LAYA heads' α and LOO drops over the whole test set per
seed, from ``class_profiles.csv``; the paper's-definition line is the LAYA heads' all-layer Spearman under the
frozen-α ``zero`` intervention over seeds, from ``results.csv``. The docs quote the files rather than
retyping numbers; ``--overview`` prints the results page's overview (LAYA's accuracy and α faithfulness per
setting, with its paired t-tests over seeds against the other heads), which tests/docs compares with
docs/results.md.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python scripts/...` from a checkout
from laya.analysis.head.attribution import METHOD_LABELS
from laya.analysis.head.profiles import seed_table
from laya.analysis.statistics import BEFORE_CORRECTION, holm, holm_reading, paired_over_seeds, seed_interval, verdict
from laya.app.seed_views import seed_global_profile, seed_profiles, seed_stability
from laya.training.bundle import stale_posthoc_note
from laya.training.suite import CLASS_PROFILES_FILE

SCORES = {
    "Integrated Gradients": "IG (post-hoc)",  # summaries written before IG's label named its baseline
    "Integrated Gradients (baseline: training mean)": "IG, training-mean baseline (post-hoc)",
    "ScalarMix weights (intrinsic, global)": "global weights",
    "LAYA α (intrinsic)": "α (intrinsic)",
}
COLUMNS = {
    "head": "head",
    "seeds": "seeds",
    "accuracy": "accuracy",
    "layer scores": "layer scores",
    "Spearman (informative layers)": "**Spearman, informative layers**",
    "top-1 agreement": "top-1 agreement",
    "Deletion@1 / oracle": "Deletion@1 / oracle",
    "Deletion@1 / oracle (median)": "Deletion@1 / oracle (median)",  # robust companions: summaries
    "Deletion@1 / oracle (5%-trimmed mean)": "Deletion@1 / oracle (5%-trimmed mean)",  # since issue 18
    "Spearman (all layers)": "Spearman, all layers (paper)",
}


def readme_table(setting: Path) -> str:
    summary = pd.read_csv(setting / "summary.csv")
    table = summary[[c for c in COLUMNS if c in summary]].rename(columns=COLUMNS)
    table["layer scores"] = table["layer scores"].map(lambda s: SCORES.get(s, s))
    return table.to_markdown(index=False)


def comparisons(setting: Path) -> str:
    rows = pd.read_csv(setting / "comparisons.csv")
    return "\n".join(f"* {r['comparison']}: {r['over seeds']}; over inputs: {r['over inputs (seed 0)']}"
                     for _, r in rows.iterrows())  # fmt: skip


def depth_across_seeds(setting: Path, head: str = "laya") -> str:
    """Per layer, the head's mean α and mean LOO drop over the test set: mean ± std over seeds, top layer per seed."""
    table = pd.read_csv(setting / CLASS_PROFILES_FILE)
    lines = []
    for values, label in (("scores", "α"), ("loo", "LOO drop (headline intervention)")):
        whole = seed_global_profile(seed_profiles(table, head, values))
        wide = seed_table(whole)
        seeds = wide.shape[1]
        cells = ", ".join(f"{layer} {mean:.3f}" + (f" ± {std:.3f}" if seeds > 1 else "")
                          for layer, mean, std in zip(wide.index, wide.mean(axis=1), wide.std(axis=1, ddof=1)))  # fmt: skip
        tops = seed_stability(whole)["top layer per seed"][0]
        over = f"mean ± std over {seeds} seeds" if seeds > 1 else "one seed"
        lines.append(f"* {head} {label} over the test set ({over}): {cells}; top layer per seed: {tops}")
    return "\n".join(lines)


def paper_definition(setting: Path, methods: tuple[str, ...] = ("integrated_gradients", "input_x_gradient")) -> str:
    """The LAYA heads' α under the paper's faithfulness (all-layer Spearman, frozen-α ``zero``, signed post-hoc
    scores): mean ± std [t-interval] over seeds, and paired t-tests over seeds against ``methods`` on the same heads."""
    results = pd.read_csv(setting / "results.csv")
    laya = results[(results["head"] == "laya") & (results["mode"] == "zero") & (results["reduction"] == "signed")]
    values = {m: part.sort_values("seed")["spearman"].to_numpy() for m, part in laya.groupby("method")}
    alpha = values.get("laya_alpha", [])
    if len(alpha) == 0 or pd.isna(alpha).all():
        return "* paper's definition: n/a"
    if len(alpha) < 2:
        return f"* paper's definition (all layers, frozen-α zero), α on one seed: {alpha[0]:.3f}"
    ci = seed_interval(alpha)
    text = (f"* paper's definition (all layers, frozen-α zero), α over {len(alpha)} seeds: {alpha.mean():.3f} ± "
            f"{alpha.std(ddof=1):.3f} [{ci.low:.3f}, {ci.high:.3f}]")  # fmt: skip
    tests = [verdict(paired_over_seeds(alpha, values[m]), "α", METHOD_LABELS[m]) for m in methods if m in values]
    return "; ".join([text, *tests])


SETTING_FILES = ("summary.csv", "comparisons.csv", CLASS_PROFILES_FILE, "results.csv")
OTHER_HEADS = ("LastLayer", "Concat", "ScalarMix")
_DELTA = re.compile(r"Δ ([+-]?\d+\.\d+ \[[^\]]+\]), p=([^)]+)\)")


def _accuracy_delta(verdict_text: str, adjusted_p: float) -> str:
    """``LAYA ≈ Concat: tie (paired t-test over seeds, Δ -0.003 [-0.007, +0.002], p=0.2)`` -> ``tie: -0.003 [...]``;
    a tie also where the Holm-adjusted p of its row's family (``adjusted_p``) exceeds 0.05."""
    match = _DELTA.search(verdict_text)
    if match is None:
        return verdict_text
    delta, p = match.groups()
    low, high = (float(x) for x in re.findall(r"[+-]?\d+\.\d+", delta)[1:3])
    reading = holm_reading(low, high, adjusted_p)
    if reading == "tie":
        return f"tie: {delta}"
    if reading == BEFORE_CORRECTION:
        return f"{BEFORE_CORRECTION}: {delta} (p = {p}, Holm p = {adjusted_p:.2g})"
    return f"**{delta}** (p = {p}, Holm p = {adjusted_p:.2g})"


def overview(settings: list[Path], docs_page: str = "docs/results.md") -> str:
    """The results page's overview table (each setting linked to its section of ``docs_page``): per setting, LAYA's accuracy and α faithfulness over seeds (``summary.csv``)
    and LAYA − each other head's accuracy, paired t-test over seeds (``comparisons.csv``), Holm-corrected over the
    three comparisons of each row."""
    header = ["setting", "seeds", "LAYA accuracy", *(f"LAYA − {h}" for h in OTHER_HEADS),
              "LAYA α: Spearman, informative layers"]  # fmt: skip
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for setting in settings:
        laya = pd.read_csv(setting / "summary.csv").set_index("head").loc["LAYA"]
        comparisons = pd.read_csv(setting / "comparisons.csv")
        accuracy = comparisons[(comparisons["comparison"] == "accuracy") & (comparisons["A"] == "LAYA")]
        rows_b = [accuracy.loc[accuracy["B"] == h].iloc[0] for h in OTHER_HEADS]
        adjusted = holm([r["p (seeds)"] for r in rows_b])
        deltas = [_accuracy_delta(r["over seeds"], p) for r, p in zip(rows_b, adjusted)]
        cells = [f"[{setting.name}]({docs_page}#{setting.name})", str(laya["seeds"]), laya["accuracy"], *deltas,
                 laya["Spearman (informative layers)"]]  # fmt: skip
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main() -> None:
    args = sys.argv[1:]
    summary_only = args[:1] == ["--overview"]
    settings = [Path(a) for a in args[summary_only:]]
    for setting in settings:
        missing = [name for name in SETTING_FILES if not (setting / name).is_file()]
        if missing:
            sys.exit(f"{setting}: no {', '.join(missing)} (written by `python -m laya reproduce <setting>`)")
    if summary_only:  # LAYA's accuracy and α faithfulness: no post-hoc number, never stale
        print(overview(settings, docs_page=""))  # for docs/results.md itself: links to its own sections
        return
    for setting in settings:
        note = stale_posthoc_note(setting)
        print(
            f"## {setting.name}\n\n" + (f"> {note}\n\n" if note else "")
            + f"{readme_table(setting)}\n\n{comparisons(setting)}\n{depth_across_seeds(setting)}\n"
            f"{paper_definition(setting)}\n"
        )


if __name__ == "__main__":
    main()
