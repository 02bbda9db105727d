"""Which unit's Grad-CAM to trust on this network: every unit's map of the predicted class against a random map of
the unit's own grid, on the pixel metrics of :mod:`laya.analysis.pixel_faithfulness`, paired over the same images.

Which layer to use for Grad-CAM has no general answer (pytorch-grad-cam's maintainers, jacobgil/pytorch-grad-cam#43);
on one network and its data it can be measured. For ``N`` test images (``uint8 (N, C, S, S)``, their source frame)
and the class the network predicts for each:

* **maps**: every unit's Grad-CAM from one forward and one backward
  (:func:`~laya.analysis.network.gradcam.unit_gradcam`, on the preprocessed images), brought to the source frame
  (:func:`~laya.analysis.pixel_faithfulness.to_frame`), where the pixels are perturbed;
* **each unit's random baseline**: a seeded uniform random map drawn on the unit's own grid ``h x w`` and put through
  the same scaling and resizing (:func:`~laya.analysis.network.gradcam.resized`, then to the frame). It knows nothing
  of the input but has the unit's resolution, so a coarse map is not judged on its coarseness (deletion with a
  constant fill rewards scattered removal). Units of one grid share it;
* **metrics**, on the softmax probability of the predicted class through the network's preprocessing, as
  ``benchmarks/spatial_maps.py`` measures them: insertion AUC from the image's Gaussian blur (sigma 2 px, kernel 9;
  higher is better), ROAD combined (noisy linear imputation at :data:`FRACTIONS`; higher), deletion AUC to the
  image's mean colour (lower), :data:`STEPS` steps each;
* **the test**: per unit and metric the mean over images with its bootstrap CI, its random map's, and unit minus
  random with a paired bootstrap over the same resamples, Holm-adjusted over the ``3 U`` comparisons. A unit **beats
  random** on a metric where the difference lies in the metric's better direction with its 95 % CI excluding 0 and
  its Holm-adjusted p at most :data:`ALPHA` (:func:`~laya.analysis.statistics.holm_verdict`);
* **the choice** (:func:`choose`): the unit that beats random on the most metrics, ties broken by the larger lower CI
  bound of its ROAD difference, then by the earlier unit; None where no unit beats random on any metric;
* **cost**: per unit the seconds per image of its Grad-CAM alone (one forward, the backward down to that unit, its
  map: pytorch-grad-cam's work with that unit as its one target layer), beside one forward and every unit's map from
  the one pass, on one batch of at most :data:`COST_BATCH` images, the fastest of ``repeats`` round-robin timings on
  the model's device, each at least :data:`MIN_SECONDS` long (:func:`~laya.analysis.timing.fastest_seconds`).

A unit that beats random on ROAD ranks the pixels the network's output is sensitive to better than chance; it says
nothing of whether the map outlines the object.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
from torch import Tensor, nn

from laya.analysis.network.gradcam import resized, unit_gradcam
from laya.analysis.network.recording import as_network, logits_of
from laya.analysis.pixel_faithfulness import ROWS, deletion_auc, insertion_auc, road, to_frame
from laya.analysis.sample import sample_indices
from laya.analysis.statistics import holm, holm_verdict, mean_intervals, paired_mean_differences
from laya.analysis.timing import fastest_seconds
from laya.data.datasets import Images
from laya.model.devices import model_device
from laya.model.hooks import pass_rows

METRICS = {"insertion": "higher", "road": "higher", "deletion": "lower"}  # each metric's better direction
STEPS = 16  # deletion / insertion steps
FRACTIONS = (0.2, 0.4, 0.6, 0.8)  # ROAD's removed fractions
SAMPLE = 50  # test images, class-balanced (``laya attach --gradcam-sample``)
ALPHA = 0.05
COST_BATCH = 8  # images of the timed batch
REPEATS = 5
MIN_SECONDS = 0.05  # each timing repeats its run until it lasts this long
ROW_COLUMNS = ("unit", "metric", "mean", "low", "high", "random", "random_low", "random_high", "diff", "diff_low",
               "diff_high", "p_value", "holm_p")  # fmt: skip
UNIT_COLUMNS = ("unit", "h", "w", "seconds", "x_forward")
TIE_BREAK = "road"  # the metric whose lower CI bound breaks a tie in wins


@dataclass
class GradcamChoice:
    """Every unit's Grad-CAM against random (module docstring) on ``n`` test images drawn with ``seed``: ``rows`` one
    per unit and metric (:data:`ROW_COLUMNS`: the unit's mean [CI], its random map's, unit minus random [paired
    CI], the p-value and its Holm adjustment); ``units`` one per unit (:data:`UNIT_COLUMNS`: its grid ``h x w``,
    seconds per image of its map alone and that over one forward); ``forward_seconds`` and ``all_seconds`` per image
    of one forward and of every unit's map from one pass. Verdicts and the choice are computed from these numbers,
    never stored apart from them."""

    n: int
    seed: int
    rows: pd.DataFrame
    units: pd.DataFrame
    forward_seconds: float
    all_seconds: float

    @property
    def beats(self) -> pd.Series:
        """Per row: whether the unit beats random on that metric (module docstring)."""
        return pd.Series([holm_verdict(r.diff_low, r.diff_high, r.holm_p) == METRICS[r.metric]
                          for r in self.rows.itertuples()], index=self.rows.index, dtype=bool)  # fmt: skip

    def winners(self, metric: str) -> list[str]:
        """The units that beat random on ``metric``, in unit order."""
        return self.rows.loc[self.beats & (self.rows["metric"] == metric), "unit"].tolist()

    @property
    def wins(self) -> pd.Series:
        """Per unit (in unit order): on how many metrics it beats random."""
        counts = self.rows.loc[self.beats, "unit"].value_counts()
        return pd.Series([int(counts.get(u, 0)) for u in self.units["unit"]], index=list(self.units["unit"]))

    @property
    def chosen(self) -> str | None:
        """The unit to use (:func:`choose`), or None."""
        return choose(self.rows, self.beats, list(self.units["unit"]))

    def to_record(self) -> dict[str, Any]:
        """The ``gradcam`` section of ``network.json`` (``chosen`` written for readers of the file; checked on load
        against the rows)."""
        return {"n": self.n, "seed": self.seed, "rows": self.rows.to_dict(orient="records"),
                "units": self.units.to_dict(orient="records"), "forward_seconds": self.forward_seconds,
                "all_seconds": self.all_seconds, "chosen": self.chosen}  # fmt: skip


def choice_line(choice: GradcamChoice) -> str:
    """One line: the unit whose Grad-CAM to use and the metrics on which it beats random, or that none does."""
    over = (f"{choice.n:,} test images, class-balanced, seed {choice.seed}; against a random map of each unit's grid, "
            "paired bootstrap, Holm-corrected")  # fmt: skip
    chosen = choice.chosen
    if chosen is None:
        return f"Grad-CAM: no unit's map beats a random one on insertion, ROAD or deletion ({over})"
    beaten = [m for m in METRICS if chosen in choice.winners(m)]
    return f"Grad-CAM to use: {chosen}, beats random on {', '.join(beaten)} ({over})"


def choose(rows: pd.DataFrame, beats: pd.Series, units: Sequence[str]) -> str | None:
    """The unit that beats random on the most metrics (``beats`` per row of ``rows``), ties broken by the larger lower
    CI bound of its :data:`TIE_BREAK` difference (NaN lowest), then by the earlier of ``units``; None where no unit
    beats random on any metric."""
    wins = rows.loc[beats, "unit"].value_counts()
    if wins.empty:
        return None
    bound = rows[rows["metric"] == TIE_BREAK].set_index("unit")["diff_low"]
    order = {u: i for i, u in enumerate(units)}
    return max(wins.index, key=lambda u: (int(wins[u]), _finite(bound.get(u)), -order.get(u, len(order))))


def _finite(value: Any) -> float:
    return float("-inf") if value is None or pd.isna(value) else float(value)


def random_maps(n: int, grid: tuple[int, int], size: Sequence[int], frame: int, generator: torch.Generator) -> Tensor:
    """``(n, frame, frame)`` uniform random maps drawn on ``grid`` ``(h, w)`` with ``generator``, scaled and resized
    to ``size`` (the model's input) as a Grad-CAM map is, then brought to the ``frame``."""
    noise = torch.rand(n, 1, *grid, generator=generator)
    return to_frame(resized(noise, size)[:, 0], frame)


def metric_values(
    score: Callable[[Tensor], Tensor], images: Tensor, maps: Tensor, target: Tensor, steps: int = STEPS,
    fractions: Sequence[float] = FRACTIONS, seed: int = 0,
) -> dict[str, Tensor]:  # fmt: skip
    """Per metric of :data:`METRICS` the ``(N,)`` values of ``maps (N, S, S)`` on ``images (N, C, S, S)`` in
    ``[0, 1]`` for the classes ``target (N,)``: insertion from the Gaussian blur, ROAD combined, deletion to the
    image's mean colour (module docstring)."""
    from torchvision.transforms.functional import gaussian_blur

    blurred = gaussian_blur(images, kernel_size=9, sigma=2.0)
    mean_colour = images.mean(dim=(2, 3), keepdim=True).expand_as(images)
    return {"insertion": insertion_auc(score, images, maps, target, blurred, steps, seed),
            "road": road(score, images, maps, target, fractions, seed)[0],
            "deletion": deletion_auc(score, images, maps, target, mean_colour, steps, seed)}  # fmt: skip


def unit_costs(network: nn.Module, x: Tensor, units: Sequence[str], classes: Tensor,
               repeats: int = REPEATS) -> tuple[list[float], float, float]:  # fmt: skip
    """Seconds per image of each unit's Grad-CAM alone, of one forward and of every unit's map from one pass, on the
    preprocessed batch ``x`` for ``classes`` (module docstring)."""

    def forward() -> None:
        with torch.inference_mode():
            network(x)

    runs = [forward, lambda: unit_gradcam(network, x, units, classes),
            *(lambda u=u: unit_gradcam(network, x, [u], classes) for u in units)]  # fmt: skip
    seconds = [s / len(x) for s in fastest_seconds(runs, repeats, x.device, MIN_SECONDS)]
    return seconds[2:], seconds[0], seconds[1]


def gradcam_choice(
    model: nn.Module, preprocess: Callable[[Tensor], Tensor], images: Tensor, units: Sequence[str],
    resamples: int = 1000, seed: int = 0, batch_size: int = 16, steps: int = STEPS,
    fractions: Sequence[float] = FRACTIONS, repeats: int = REPEATS,
) -> GradcamChoice:  # fmt: skip
    """Every unit's Grad-CAM of the predicted class against random (module docstring) on ``images`` ``uint8 (N, C,
    S, S)``; ``model`` the network (or an attached backbone, :func:`~laya.analysis.network.recording.as_network`),
    ``preprocess`` its input transform (uint8 or float 0..255 images to its input), ``seed`` the random maps' and the
    bootstrap's, ``batch_size`` images per Grad-CAM pass (the perturbed images are scored :data:`ROWS` at a time, fewer
    where their activations would not fit: :func:`~laya.model.hooks.pass_rows`)."""
    network = as_network(model)
    device = model_device(network)
    frames = images.to(device).float() / 255.0  # (N, C, S, S) in [0, 1]: the pixels perturbed
    N, S = len(frames), frames.shape[-1]

    rows = pass_rows(network, preprocess(images[:1]), ROWS)  # fewer at large sizes, so the activations fit

    def score(x: Tensor) -> Tensor:  # the perturbed images, ``rows`` at a time (pixel_faithfulness)
        return torch.cat([logits_of(network(preprocess(x[i : i + rows] * 255.0))) for i in range(0, len(x), rows)])

    parts, targets, grids, size = [], [], [], None
    for i in range(0, N, batch_size):
        x = preprocess(images[i : i + batch_size])
        cam = unit_gradcam(network, x, units)
        parts.append(torch.stack([to_frame(cam.maps[:, u], S) for u in range(len(units))], 1).detach())
        targets.append(cam.classes)
        grids, size = cam.grids, x.shape[-2:]
    maps, target = torch.cat(parts), torch.cat(targets)  # (N, U, S, S), (N,)
    generator = torch.Generator().manual_seed(seed)
    shared = {g: random_maps(N, g, size, S, generator).to(device) for g in dict.fromkeys(grids)}  # one per grid
    from tqdm.auto import tqdm

    compared_maps = [*((u, maps[:, k]) for k, u in enumerate(units)), *shared.items()]
    values = {name: metric_values(score, frames, m, target, steps, fractions, seed)
              for name, m in tqdm(compared_maps, desc="Grad-CAM against random", unit="map", leave=False)}
    rows = []
    for metric in METRICS:
        columns = [values[u][metric] for u in units] + [values[g][metric] for g in shared]
        table = torch.stack(columns, 1).double().cpu()  # (N, U + G)
        cis = mean_intervals(table, resamples, seed)
        where = {g: len(units) + k for k, g in enumerate(shared)}
        pairs = [(k, where[grids[k]]) for k in range(len(units))]
        for (k, r), d in zip(pairs, paired_mean_differences(table, pairs, resamples, seed)):
            rows.append([units[k], metric, cis[k].estimate, cis[k].low, cis[k].high, cis[r].estimate, cis[r].low,
                         cis[r].high, d.difference.estimate, d.difference.low, d.difference.high, d.p_value])
    compared = pd.DataFrame(rows, columns=list(ROW_COLUMNS[:-1]))
    compared["holm_p"] = holm(compared["p_value"].to_numpy())
    x = preprocess(images[:COST_BATCH])
    seconds, forward, every = unit_costs(network, x, units, target[:COST_BATCH], repeats)
    costs = pd.DataFrame([[u, g[0], g[1], s, s / forward] for u, g, s in zip(units, grids, seconds)],
                         columns=list(UNIT_COLUMNS))  # fmt: skip
    return GradcamChoice(N, seed, compared, costs, forward, every)


def sampled_gradcam_choice(
    model: nn.Module, preprocess: Callable[[Tensor], Tensor], test: Images, units: Sequence[str], size: int = SAMPLE,
    seed: int = 0, resamples: int = 1000, batch_size: int = 16, repeats: int = REPEATS,
) -> GradcamChoice:  # fmt: skip
    """:func:`gradcam_choice` on a class-balanced sample of ``size`` images of ``test`` drawn with ``seed``
    (:func:`~laya.analysis.sample.sample_indices`, the network report's sampler)."""
    index = sample_indices(test.labels, size, seed)
    images = torch.cat(list(test.iter_batches([index[i : i + 256] for i in range(0, len(index), 256)])))
    return gradcam_choice(model, preprocess, images, units, resamples, seed, batch_size, repeats=repeats)


__all__ = ["ALPHA", "COST_BATCH", "FRACTIONS", "METRICS", "MIN_SECONDS", "REPEATS", "ROW_COLUMNS", "SAMPLE", "STEPS", "TIE_BREAK",
           "UNIT_COLUMNS", "GradcamChoice", "choice_line", "choose", "gradcam_choice", "metric_values", "random_maps",
           "sampled_gradcam_choice", "unit_costs"]  # fmt: skip
