"""The sentences a page opens with: its verdict, generated from the report, never written by hand.

* :func:`faithfulness_verdict`: the methods of one checkpoint ranked by the headline metric, each with its 95 %
  CI, and the primary method against every other with the paired bootstrap the report keeps (``comparisons``);
  the direction word comes from the paired CI (:func:`laya.analysis.statistics.holm_verdict`): "ties" where it
  covers 0 or where the Holm-adjusted p over the comparisons stated together exceeds 0.05.
* :func:`exit_verdict`: whether the exit a depth headline names predicts the right class for this input.
* :func:`measured_exit_verdict`: what the measured early-exit runs save, a wall-clock saving stated only where it
  exceeds its own timing noise (:func:`laya.analysis.statistics.saving_verdict`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
import torch
from torch import Tensor

from laya.analysis.depth.input_depth import InputDepth
from laya.analysis.depth.measured import best_exit, saving_noise, saving_text
from laya.analysis.head.faithfulness import HEADLINE_METRIC, METRIC_LABELS
from laya.analysis.report import Report
from laya.analysis.report_record import read_per_input
from laya.analysis.sample import class_slug
from laya.analysis.statistics import BEFORE_CORRECTION, format_diff, holm, holm_reading, paired_mean_differences
from laya.app.labels import method_label as _method_label
from laya.app.numbers import ci_text
from laya.app.text import shown

WORDS = {"higher": "above", "lower": "below", "tie": "ties with", BEFORE_CORRECTION: f"{BEFORE_CORRECTION}, against"}


def faithfulness_verdict(report: Report, mode: str, reduction: str, metric: str = HEADLINE_METRIC,
                         per_input: Mapping[str, Tensor] | None = None, resamples: int = 1000) -> str:  # fmt: skip
    """One markdown paragraph: methods ranked by ``metric``'s mean (``mean [95% CI]``), then the primary method
    minus each other method, ``+d [low, high]`` from the report's paired bootstrap over the same inputs, read as
    "above", "below" or "ties with" (CI covering 0, or Holm-adjusted p over these comparisons above 0.05). Methods without a testable ranking are left out and named.

    ``per_input`` (the report's ``per_input.safetensors``: ``faithfulness/<mode>/<reduction>/<method>/<metric>``,
    each ``(N,)``, NaN where untestable) adds the pairs the report does not test: each method against the next
    in the ranking, by a paired bootstrap of the means (``paired_mean_differences``, seed 0)."""
    table = report.faithfulness_table()
    part = table[(table["mode"] == mode) & (table["reduction"] == reduction)]
    if part.empty:
        return f"No faithfulness results for intervention `{mode}` and {reduction} scores in this report."
    scored = part[part["status"].eq("") & part[metric].notna()].sort_values(metric, ascending=False)
    ranked = "; ".join(
        f"{method_label(r.method)} {ci_text({'estimate': r[metric], 'low': r[f'{metric}_low'], 'high': r[f'{metric}_high']})}"
        for _, r in scored.iterrows()
    )
    if scored.empty:
        return f"No method has a testable ranking under intervention `{mode}` ({reduction} scores)."
    text = f"**{METRIC_LABELS[metric]}**, intervention `{mode}`, {reduction} scores, ranked by mean: {ranked}."
    untested = [method_label(m) for m in part.loc[~part.index.isin(scored.index), "method"]]
    if untested:
        text += f" Not ranked (no testable ranking): {', '.join(untested)}."
    primary = report.primary_method
    pairs = _paired(report.comparisons(), mode, reduction, metric, primary)
    if pairs:
        text += (f" {method_label(primary)} against each (paired bootstrap over the same inputs, 95 % CI; "
                 f"Holm-corrected over the {len(pairs)}): "
                 + "; ".join(pairs) + ".")  # fmt: skip
    adjacent = _adjacent(list(scored["method"]), primary, per_input, mode, reduction, metric, resamples)
    if adjacent:
        text += (f" Each against the next in the ranking (paired bootstrap of the per-input values; Holm-corrected "
                 f"over the {len(adjacent)}): " + "; ".join(adjacent) + ".")  # fmt: skip
    elif len(scored) > 2:
        text += " Pairs without the primary method are ordered by their means only (the report keeps no paired test)."
    return text


def load_per_input(directory: str | Path) -> dict[str, Tensor] | None:
    """The evaluation's per-input arrays (``per_input.safetensors`` beside ``report.json``, never pickled, read as
    untrusted: :func:`laya.analysis.report_record.read_per_input`), or None where the checkpoint has none (the
    bundled ones do not ship them). Raises :class:`~laya.model.attached_files.AttachedFileError` where they do not
    read."""
    return read_per_input(directory)


def _adjacent(ranked: list[str], primary: str, per_input: Mapping[str, Tensor] | None, mode: str, reduction: str,
              metric: str, resamples: int) -> list[str]:  # fmt: skip
    """``"IG (post-hoc) above Gradient × Input (post-hoc) (+0.014 [+0.003, +0.025])"`` for each neighbouring pair
    of ``ranked`` without the primary method, from ``per_input``'s arrays (empty without them)."""
    keys = [f"faithfulness/{mode}/{reduction}/{m}/{metric}" for m in ranked]
    if not per_input or not all(k in per_input for k in keys):
        return []
    pairs = [(i, i + 1) for i in range(len(ranked) - 1) if primary not in (ranked[i], ranked[i + 1])]
    values = torch.stack([torch.as_tensor(per_input[k]).double() for k in keys], dim=1)  # (N, methods)
    results = paired_mean_differences(values, pairs, resamples)
    out = []
    for (a, b), r, p in zip(pairs, results, holm([r.p_value for r in results])):
        d = r.difference
        word = WORDS[holm_reading(d.low, d.high, p)]
        out.append(f"{method_label(ranked[a])} {word} {method_label(ranked[b])} ({format_diff(d.estimate, d.low, d.high)})")
    return out


def _paired(comparisons: pd.DataFrame, mode: str, reduction: str, metric: str, primary: str) -> list[str]:
    """``"below IG (post-hoc) by −0.118 [−0.152, −0.089]"`` per comparison of ``primary`` with another method."""
    if comparisons.empty:
        return []
    rows = comparisons[(comparisons["mode"] == mode) & (comparisons["metric"] == metric)
                       & (comparisons["a"] == primary) & (comparisons["reduction_a"] == reduction)
                       & (comparisons["reduction_b"] == reduction)]  # fmt: skip
    rows = rows.sort_values("difference")
    return [f"{WORDS[holm_reading(r.low, r.high, p)]} {method_label(r.b)} ({format_diff(r.difference, r.low, r.high)})"
            for (_, r), p in zip(rows.iterrows(), holm(rows["p_value"].to_numpy(float)))]


def method_label(method: str) -> str:
    """The method's display name, Markdown-escaped (a report's method names are untrusted text)."""
    return shown(_method_label(method))


def example_label(name: str, classes: Sequence[str]) -> int | None:
    """The true class of a bundled example, named ``<class index>-<class slug>[-…].<ext>`` as
    :func:`laya.analysis.sample.write_examples` writes them (``00-t-shirt-top.png`` -> 0); None for any other
    name (an upload's label is unknown)."""
    match = re.fullmatch(r"(\d+)-([a-z0-9-]+)\.\w+", name)
    if not match or int(match[1]) >= len(classes):
        return None
    index, slug = int(match[1]), class_slug(classes[int(match[1])])
    return index if match[2] == slug or match[2].startswith(f"{slug}-") else None


def exit_verdict(result: InputDepth, threshold: float, classes: Sequence[str], layers: Sequence[str],
                 label: int | None = None) -> str:  # fmt: skip
    """Where the early exit at confidence ``threshold`` stops this input and whether its class there is the
    full model's (and, when ``label`` is known, the right one); empty without readouts. Names are Markdown-escaped
    (:func:`laya.app.text.shown`)."""
    if result.readouts is None:
        return ""
    stop, final = result.exit_layer(threshold), int(result.readouts.final[0])
    if stop >= len(layers):
        text = f"At t = {threshold:g} no readout is confident enough: the input runs the full model, which predicts {shown(classes[final])}"
        predicted = final
    else:
        predicted = int(result.readouts.classes[0, stop])
        same = "the full model's class" if predicted == final else f"not the full model's {shown(classes[final])}"
        text = f"Exit at t = {threshold:g}: {shown(layers[stop])}, whose readout predicts {shown(classes[predicted])}, {same}"
    if label is not None:
        text += f"; {'right' if predicted == label else 'wrong'}: the file name says {shown(classes[label])}"
    return text + "."


def measured_exit_verdict(report: Mapping, tolerance: float = 0.01) -> str:
    """One sentence per exit kind of an ``exits.json`` report (:func:`laya.analysis.depth.measured.best_exit`): the
    cheapest confidence threshold within ``tolerance`` of the full model's accuracy, its MACs saved (exact), and
    its wall-clock saving at each batch size where it exceeds that kind's timing noise, else "within the noise"."""
    runs = pd.DataFrame(report["runs"])
    batches = sorted(int(c.split("_b")[1]) for c in runs.columns if c.startswith("saved_b"))
    out = []
    for kind, part in runs.groupby("exits", sort=False):
        full = part[part["policy"] == "full model"].iloc[0]
        row, within = best_exit(part, tolerance)
        if not within:
            out.append(f"{shown(kind)} exits: no threshold stays within {tolerance * 100:g} point of the full "
                       f"model's accuracy ({full['accuracy']:.3f}).")  # fmt: skip
            continue
        times = "; ".join(f"batch {b:,} {saving_text(row[f'saved_b{b}'], noise)} (noise ±{noise:.0%})"
                          for b in batches for noise in [saving_noise(part, b)])  # fmt: skip
        saved = f"{row['macs_saved']:.0%}".replace("-", "−")
        out.append(f"{shown(kind)} exits at t = {row['parameter']:g}: accuracy {row['accuracy']:.3f} "
                   f"(full model {full['accuracy']:.3f}), {saved} of the MACs saved; wall clock {times}.")  # fmt: skip
    return " ".join(out)


__all__ = ["example_label", "exit_verdict", "faithfulness_verdict", "load_per_input", "measured_exit_verdict"]
