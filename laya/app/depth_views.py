"""The depth report (``depth.json``, :mod:`laya.analysis.depth`) as the pages read it: pure, tested without a
browser. Its figures are :mod:`laya.app.depth_plots`.

One input's error and OOD scores against the report's thresholds, as a table and in words (:func:`ood_status`),
the OOD score to trust for a checkpoint and the only ones Inspect asks for, the warning on a Mahalanobis fit that
cannot be trusted, and the per-class prediction depth and overthinking with their 95 % CIs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from laya.analysis.depth.detection import COVARIANCE, mahalanobis_trusted
from laya.analysis.depth.layer_lens import LENS_SOURCE
from laya.analysis.depth.readouts import NETWORK
from laya.app.numbers import ci_cells, count_of, is_missing, number_text, percent
from laya.app.text import plain

HUGE_MAHALANOBIS = 1e3  # standardised by its training mean and std: typical in-distribution values are O(1)
ONE_LAYER_NOTE = (
    "Not drawn for the own classifier: it reads the pre-logits layer alone, so its logit contributions per layer "
    "are one bar (that layer's, the whole logit) and removing any other layer leaves it unchanged (a flat pruning "
    "panel). Inspect and Class-wise explain the network by its units instead."
)

FIXED_LENS_NOTE = ("Pre-logits is not drawn in the lens: the network's own classifier reads it, so its readout is the "
                   "final prediction itself (KL 0, rank 1) by construction; the layers before read through linear "
                   "probes.")  # fmt: skip


def lens_rows(table: pd.DataFrame, source: str, last: str) -> pd.DataFrame:
    """A lens table (``layer`` column, :mod:`laya.analysis.depth.layer_lens`) without the row fixed by
    construction: where the readouts are an attached network's probes ending at its own classifier (Lens source
    ``linear probes, network classifier``), the ``last`` layer's is the final distribution itself
    (:data:`FIXED_LENS_NOTE`); every row otherwise."""
    return table[table["layer"] != last] if source == LENS_SOURCE[NETWORK] else table


def _flags(key: str, value: float, threshold: float | None) -> tuple[float, float | None, str, bool]:
    """``(shown value, shown threshold, rule, flagged)``: max softmax is stored negated (higher = more
    suspicious) and shown as the probability itself, flagged *below* its threshold."""
    flagged = threshold is not None and not is_missing(threshold) and value > threshold
    if key == "msp":
        return -value, None if threshold is None else -threshold, "flagged below", flagged
    return value, threshold, "flagged above", flagged


def detection_view(scores: Mapping[str, float], depth: Mapping | None) -> pd.DataFrame:
    """This input's error/OOD scores as read: ``score, value, rule, threshold, flagged`` (max softmax as the
    probability, flagged below its threshold, never negated); thresholds from ``depth.json``."""
    from laya.analysis.depth.detection import SCORE_LABELS

    thresholds = (depth or {}).get("detection", {}).get("flag_thresholds", {})
    rows = []
    for key, value in scores.items():
        shown, threshold, rule, flagged = _flags(key, value, thresholds.get(key))
        rows.append({"score": SCORE_LABELS.get(key, key), "value": number_text(shown), "rule": rule,
                     "threshold": number_text(threshold), "flagged": "yes" if flagged else "no"})  # fmt: skip
    return pd.DataFrame(rows)


def prediction_depth_view(table: pd.DataFrame) -> pd.DataFrame:
    """The depth report's per-class prediction depth and overthinking as display text with 95% CIs: rates as
    percentages, ``errors`` as ``k of n``."""
    def rate(column: str) -> list[str]:
        return [f"{percent(v)} [{percent(lo)}, {percent(hi)}]" if not is_missing(v) else "–"
                for v, lo, hi in zip(table[column], table[f"{column}_low"], table[f"{column}_high"])]  # fmt: skip

    return pd.DataFrame(
        {
            "class": table["class"],
            "inputs": [f"{int(n):,}" for n in table["n"]],
            "errors": [count_of(int(e), int(n)) for e, n in zip(table["errors"], table["n"])],
            "prediction depth [95% CI]": ci_cells(table, "prediction_depth", 2),
            "overthinking rate [95% CI]": rate("overthinking_rate"),
            "errors a shallower layer got right [95% CI]": rate("overthought_errors"),
        }
    )


def exit_estimate_caption(at_1pt: Mapping) -> str:
    """The caption of the early-exit estimate (``depth.json``'s ``early_exit.at_1pt``): the compute saved at the
    cheapest threshold within 1 point of the full accuracy, or that none is (its threshold is then null)."""
    saved, threshold = at_1pt["saved"], at_1pt["threshold"]
    if saved is None or threshold is None:
        text = "No confidence threshold keeps the accuracy within 1 point of the full model's"
    else:
        text = f"Estimated compute saved at ≤ 1 point accuracy loss: {saved:.1%} (t = {threshold:g})"
    return (text + ": per-input arithmetic on per-layer backbone timings, exit readouts not counted. Measured "
            "early-exit runs and truncated models: `python -m laya exits` (exits.json).")


def depth_metric(depth: int | None, layers: int, readout: str) -> tuple[str, str]:
    """``(label, value)`` of a prediction-depth metric named for its ``readout`` (``tuned lens``, ``probes``):
    ``depth`` is 1-based over ``layers`` read, ``layers + 1`` where even the last one disagrees, None where
    there is no such readout."""
    label = f"Prediction depth ({readout})"
    if depth is None:
        return label, "–"
    return label, f"{depth:d} of {layers}" if depth <= layers else "never (even the last disagrees)"


def best_ood_score(depth: Mapping, widths: Sequence[int] | None = None) -> tuple[str, float, int] | None:
    """``(score key, mean AUROC, OOD sets)``: the detection score with the highest mean AUROC over the depth
    report's OOD tasks (not misclassification), or None without OOD tasks. Given the layers' ``widths``,
    Mahalanobis is left out where its fit is not trusted
    (:func:`~laya.analysis.depth.detection.mahalanobis_trusted`)."""
    table = pd.DataFrame(depth.get("detection", {}).get("table", []))
    if table.empty:
        return None
    ood = table[table["task"].str.startswith("OOD")]
    if widths is not None and not mahalanobis_trusted(depth.get("covariance"), depth.get("n_train", 0), widths):
        ood = ood[ood["score"] != "mahalanobis"]
    if ood.empty:
        return None
    means = ood.groupby("score", sort=False)["auroc"].mean()
    return str(means.idxmax()), float(means.max()), int(ood["task"].nunique())


def false_alarm_text(rate: float) -> str:
    """For a threshold at the in-distribution ``1 - rate`` quantile: ``the in-distribution 95th percentile: it
    flags 5 % of in-distribution test inputs by design``."""
    return (
        f"the in-distribution {100 * (1 - rate):g}th percentile: it flags {100 * rate:g} % of in-distribution "
        "test inputs by design"
    )


def ood_status(scores: Mapping[str, float], depth: Mapping, widths: Sequence[int] | None = None) -> list[str]:
    """Markdown lines on one input's uncertainty from its scores
    (:class:`laya.analysis.depth.input_depth.InputDepth`) and the depth report: max softmax against its threshold,
    the best trusted OOD score (:func:`best_ood_score` for layers ``widths`` wide) with its threshold, and the
    false-alarm rate of those thresholds in words."""
    from laya.analysis.depth.detection import SCORE_LABELS

    thresholds = depth.get("detection", {}).get("flag_thresholds", {})
    rate = float(depth.get("detection", {}).get("flag_rate", 0.05))
    lines = []
    if "msp" in scores:
        shown, threshold, _, flagged = _flags("msp", scores["msp"], thresholds.get("msp"))
        verdict = "**low: flagged**" if flagged else "not flagged"
        limit = f" (flagged below {threshold:.3f})" if threshold is not None else ""
        lines.append(f"Max softmax **{shown:.3f}**{limit}: {verdict}.")
    best = best_ood_score(depth, widths)
    if best is not None and best[0] in scores:
        key, auroc, sets = best
        shown, threshold, rule, flagged = _flags(key, scores[key], thresholds.get(key))
        verdict = "**flagged as out of distribution**" if flagged else "not flagged"
        limit = f", {rule} {threshold:.4g}" if threshold is not None else ""
        lines.append(
            f"Best OOD score of this model, {plain(SCORE_LABELS.get(key, key))} (mean AUROC {auroc:.3f} over "
            f"{sets} OOD "
            f"sets): **{shown:.4g}**{limit}: {verdict}."
        )
    lines.append(f"Each threshold is {false_alarm_text(rate)}, so a flag alone is no proof of an OOD input.")
    return lines


def shown_ood_scores(depth: Mapping, widths: Sequence[int] | None = None) -> tuple[str, ...]:
    """The detection scores :func:`ood_status` shows for a checkpoint with this depth report: max softmax and the
    best trusted OOD score (what Inspect asks its explanation for, so that it computes no other)."""
    best = best_ood_score(depth, widths)
    return ("msp",) if best is None or best[0] == "msp" else ("msp", best[0])


def mahalanobis_warning(
    value: float | None, n_train: int, widths: Sequence[int], covariance: str | None = None
) -> str | None:
    """A warning when the Mahalanobis score cannot be trusted, else None. A Ledoit–Wolf fit (``covariance``,
    as the depth report records it) always can; an older fit not when fitted on fewer training inputs than a
    layer has features (a singular covariance) or when the value is huge (> :data:`HUGE_MAHALANOBIS`)."""
    widest = max(widths) if widths else 0
    trusted = mahalanobis_trusted(covariance, n_train, widths)
    if value is None or covariance == COVARIANCE or (trusted and abs(value) <= HUGE_MAHALANOBIS):
        return None
    return (
        f"Mahalanobis = {value:.3g} comes from a covariance fitted on {n_train:,} training inputs for layers up to "
        f"{widest:,} features wide without shrinkage: it is singular or nearly so, and such values are not "
        "meaningful. Rerun `python -m laya depth --checkpoint DIR`: it refits with a Ledoit–Wolf covariance."
    )


__all__ = [
    "FIXED_LENS_NOTE",
    "HUGE_MAHALANOBIS",
    "ONE_LAYER_NOTE",
    "best_ood_score",
    "depth_metric",
    "detection_view",
    "exit_estimate_caption",
    "false_alarm_text",
    "lens_rows",
    "mahalanobis_warning",
    "ood_status",
    "prediction_depth_view",
    "shown_ood_scores",
]
