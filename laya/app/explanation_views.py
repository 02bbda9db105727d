"""One input explained by a head over the layers it reads (:class:`~laya.analysis.head.explain.Explanation`), as Inspect
and Compare show it: pure, tested without a browser.

The layer table and its display text, this input's faithfulness per method, the CSV and JSON downloads, the warning
on outputs that are not finite, and what the view cost its own call (:func:`model_time_caption`). The other kind of
explanation, the network by its own units, is :mod:`laya.app.network_views`.
"""

from __future__ import annotations

import json

import pandas as pd
import torch

from laya.analysis.depth.input_depth import InputDepth
from laya.analysis.head.attribution import METHOD_LABELS
from laya.analysis.head.explain import Explanation
from laya.app.labels import is_posthoc, method_label
from laya.app.numbers import is_missing, number_text, percent


def nonfinite_warning(result: Explanation | InputDepth) -> str | None:
    """A warning naming the outputs that hold NaN/Inf (NaN/Inf weights loaded anyway; finite weights whose logits
    overflow are refused before: :mod:`laya.analysis.overflow`), else None.

    An :class:`Explanation`: probabilities, LOO drops, layer scores; an :class:`InputDepth`: logits,
    per-layer logit terms, readout probabilities, detection scores.
    """
    if isinstance(result, InputDepth):
        parts = {"logits": result.attribution.logits, "per-layer logit attribution": result.attribution.terms,
                 "error and OOD scores": torch.tensor(list(result.scores.values()), dtype=torch.float64)}  # fmt: skip
        if result.readouts is not None:
            parts["readout probabilities"] = result.readouts.probs
    else:
        parts = {"probabilities": result.probs, "leave-one-layer-out drops": result.drops}
        parts |= {f"{method_label(m)} scores": v for m, v in result.scores.items()}
    bad = [name for name, values in parts.items() if not bool(torch.isfinite(values.double()).all())]
    if not bad:
        return None
    return (
        f"Not finite (NaN or Inf): {', '.join(bad)}. The prediction and every number derived from these are "
        "meaningless, and the charts leave such values out; the model's weights are likely damaged or extreme."
    )


INSPECT_TARGET = 1.5  # Inspect's default view should cost at most this many forwards (docs/speed.md)


def model_time_caption(explanation: Explanation) -> str | None:
    """What this explanation cost, as its own call measured it: the total model time, its ratio to the forward
    stage (preprocessing and the backbone pass: less than a plain forward, which also runs the head, so the ratio
    is an upper bound of the page's cost in forwards), and each further stage; flagged where the ratio passes
    :data:`INSPECT_TARGET`. None where no time was recorded."""
    seconds = explanation.seconds
    forward = seconds.get("forward")
    if not forward:
        return None
    total = sum(seconds.values())
    ratio = total / forward
    parts = ", ".join(f"{stage} {value * 1e3:.2f} ms" for stage, value in seconds.items() if stage != "forward")
    verdict = f" — more than the {INSPECT_TARGET:g}× this page aims at" if ratio > INSPECT_TARGET else ""
    return (f"Model time of this view: {total * 1e3:.2f} ms, {ratio:.2f}× its backbone pass ({forward * 1e3:.2f} ms"
            f"{'; ' + parts if parts else ''}){verdict}. Measured on this server for this input, once: a cached view "
            "costs nothing more.")


def layer_table(explanation: Explanation) -> pd.DataFrame:
    """:meth:`Explanation.layer_table` with post-hoc score columns marked ``(post-hoc)``."""
    renames = {METHOD_LABELS.get(m, m): method_label(m) for m in explanation.scores}
    return explanation.layer_table().rename(columns=renames)


def layer_table_text(explanation: Explanation) -> pd.DataFrame:
    """:func:`layer_table` as the page shows it: scores, drops and probabilities through :func:`number_text`
    (a drop of 2e-10 prints ``2e-10``, not ``0.0000000002``); the exports keep the numbers."""
    table = layer_table(explanation)
    for column in table.columns[table.dtypes == "float64"]:
        table[column] = [number_text(v) for v in table[column]]
    return table


def spearman_column(n_layers: int) -> str:
    """The per-input Spearman's column name, with its n: ``Spearman ρ(score, LOO drop) over 3 layers``."""
    return f"Spearman ρ(score, LOO drop) over {n_layers} layers"


def input_faithfulness(explanation: Explanation) -> pd.DataFrame:
    """Per method on this input: kind, top-scored layer, Spearman(score, LOO drop) over the L layers (n in the
    column name), top-1 agreement, Deletion@1 (/ oracle), as display text; ``n/a (one informative layer)``
    where only one layer's drop exceeds ε (the ranking metrics are then undefined)."""
    summary = explanation.summary()
    methods = list(explanation.scores)
    na = "n/a" if explanation.status else "–"
    return pd.DataFrame(
        {
            "method": [method_label(m) for m in methods],
            "kind": ["post-hoc" if is_posthoc(m) else "intrinsic" for m in methods],
            "top layer": [explanation.layer_names[int(explanation.scores[m].argmax())] for m in methods],
            spearman_column(len(explanation.layer_names)): [
                na if is_missing(v) else number_text(v) for v in pd.to_numeric(summary["spearman"])
            ],
            "top-1 agreement": [na if is_missing(v) else ("yes" if v else "no") for v in pd.to_numeric(summary["top1"])],
            "Deletion@1": [number_text(v) for v in summary["deletion_at_1"]],
            "Deletion@1 / oracle": [
                na if is_missing(v) else percent(v) for v in pd.to_numeric(summary["deletion_at_1_norm"])
            ],
        }
    )


def explanation_csv(explanation: Explanation) -> str:
    return layer_table(explanation).to_csv(index=False)


def explanation_json(explanation: Explanation) -> str:
    """:meth:`Explanation.to_dict` with post-hoc columns marked and each method's kind, as JSON."""
    record = explanation.to_dict()
    record["layers"] = layer_table(explanation).to_dict("records")
    record["score_kinds"] = {method_label(m): "post-hoc" if is_posthoc(m) else "intrinsic" for m in explanation.scores}
    return json.dumps(record, indent=2)


__all__ = [
    "INSPECT_TARGET",
    "explanation_csv",
    "explanation_json",
    "input_faithfulness",
    "layer_table",
    "layer_table_text",
    "model_time_caption",
    "nonfinite_warning",
    "spearman_column",
]
