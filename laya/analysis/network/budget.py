"""What the network report costs, counted in rows through the network, and the samples a budget affords.

Every analysis of the report (:mod:`laya.analysis.network.report`) is a number of passes per input, fixed by the
network's ``U`` units and the report's options; none depends on the image size. So its cost relative to one forward
pass over the attach's images is its rows over the images' count, whatever the resolution: the default samples
are a fraction of a pass over CIFAR-10 and tens of passes over a few thousand images. A row is one input through the
network, or through the part of it after a unit (counted whole: the count is an upper bound on the forwards it
costs), a backward counted as two. Per explained test input:

* the default intervention, resample: ``K U`` suffix rows and the intact one; skip: ``U + 1``;
* the lesion study's k-curve: ``1 + D U`` rows (``D`` draws per k, at most ``U`` units skippable);
* the tuned and logit lens: 2; gradient x activation: 3; integrated gradients: ``3 S U`` (``S`` steps);

per image of the Grad-CAM test (:mod:`~laya.analysis.network.gradcam_choice`): 3 for every unit's map, then for each
of at most ``2 U`` maps (every unit's, a random one per grid) ``2 (T + 1) + 2 F`` perturbed images (insertion and
deletion of ``T`` steps, ROAD at ``F`` fractions); per input of the tuned lens's fit: 1.

:func:`within_budget` caps a report's samples so that its rows stay within ``budget`` forward passes over the
images (``laya attach --budget``; ``docs/decisions/attach-budget.md``): the tuned lens's sample first (one row
each, at most one pass), then the explained inputs, the lesion study's own inputs and the Grad-CAM test's images
scaled down by one factor; a Grad-CAM sample below one image per class is not run, its rows going to the explained
inputs, which keep at least one input per class.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from laya.analysis.network.gradcam_choice import FRACTIONS, STEPS

NetworkOptions = Any  # laya.analysis.network.report.NetworkOptions, which imports this module (no import circle)
ATTACH = 3.0  # ``laya attach``'s budget: forward passes over the attach's images (``laya network``'s: none)


@dataclass(frozen=True)
class ReportRows:
    """Rows through the network (module docstring) per explained test input (``explained``), per input of a lesion
    sample of its own (``lesioned``), per Grad-CAM test image (``gradcam``) and per tuned-lens input (``lens``)."""

    explained: int
    lesioned: int
    gradcam: int
    lens: int = 1


def report_rows(units: int, options: NetworkOptions) -> ReportRows:
    """The rows of one input of each of the report's samples, for a network of ``units`` units."""
    K, U, S = options.references, units, options.ig_steps
    profiles = K * U + 1 + U + 1  # resample (the default) and skip
    curve = 1 + options.lesion_draws * U
    explained = profiles + curve + 2 + 3 + 3 * S * U
    return ReportRows(explained, profiles + curve, 3 + 2 * U * (2 * (STEPS + 1) + 2 * len(FRACTIONS)))


@dataclass(frozen=True)
class Budgeted:
    """The options a budget affords (``options``), what was asked (``asked``), the rows either costs and the
    budget's rows (``budget`` passes over ``images``)."""

    options: NetworkOptions
    asked: NetworkOptions
    rows: int
    asked_rows: int
    budget: float
    images: int

    @property
    def capped(self) -> bool:
        return self.options != self.asked

    def line(self) -> str:
        """One sentence: what the budget allowed against what was asked, and how to get what was asked."""
        allowed = (f"{self.budget:g} forward passes over the {self.images:,} images, "
                   f"{round(self.budget * self.images):,} rows")
        if not self.capped:
            return f"Network report within its budget ({allowed}): {self.rows:,} rows."
        a, o = self.asked, self.options
        parts = [f"{o.limit:,} test inputs explained (asked: {_count(a.limit)})" if o.limit != a.limit else None,
                 (f"the lesion study on {o.lesion_limit:,} (asked: {_count(a.lesion_limit)})"
                  if o.lesion_limit != a.lesion_limit else None),
                 ("the Grad-CAM test not run" if o.gradcam_sample == 0 else
                  f"the Grad-CAM test on {o.gradcam_sample:,} images") + f" (asked: {a.gradcam_sample:,} images)"
                 if o.gradcam_sample != a.gradcam_sample else None]  # fmt: skip
        return (f"Network report sized to its budget ({allowed}): " + ", ".join(p for p in parts if p)
                + f" ({self.rows:,} rows; what was asked costs {self.asked_rows:,}: rerun it with `laya network`, or "
                "attach with --budget 0)")  # fmt: skip


def _count(size: int | str | None) -> str:
    return "all" if size in (None, "all") else f"{size:,}"


def _sizes(options: NetworkOptions, tests: int) -> tuple[int, int | None, int]:
    """The explained inputs, the lesion study's own inputs (None: the explained ones) and the Grad-CAM images that
    ``options`` take of ``tests`` test inputs."""
    lesion = options.lesion_limit
    lesion = None if lesion is None else min(tests if lesion == "all" else lesion, tests)
    return min(options.limit or tests, tests), lesion, min(options.gradcam_sample, tests)


def _rows(cost: ReportRows, options: NetworkOptions, lens: int, tests: int) -> int:
    explained, lesion, images = _sizes(options, tests)
    return explained * cost.explained + (lesion or 0) * cost.lesioned + images * cost.gradcam + lens * cost.lens


def within_budget(options: NetworkOptions, units: int, classes: int, trains: int, tests: int,
                  budget: float) -> Budgeted:  # fmt: skip
    """``options`` with their samples capped so that the report's rows (:func:`report_rows`, for ``units`` units) are
    at most ``budget`` forward passes over ``trains + tests`` images (module docstring); ``classes`` the classes of
    the class-balanced samples. A ``budget`` of 0 caps nothing.

    Raises:
        ValueError: a negative budget, or no units, classes or test inputs.
    """
    if budget < 0 or units < 1 or classes < 1 or tests < 1:
        raise ValueError(f"the network report's budget needs budget >= 0 (0: none) and units, classes and test inputs; "
                         f"got budget {budget}, {units} units, {classes} classes, {tests} test inputs")  # fmt: skip
    cost, lens = report_rows(units, options), min(options.lens_sample, trains)
    asked_rows = _rows(cost, options, lens, tests)
    allowed = budget * (trains + tests)
    if budget == 0 or asked_rows <= allowed:
        return Budgeted(options, options, asked_rows, asked_rows, budget, trains + tests)
    explained, lesion, images = _sizes(options, tests)
    room = max(0.0, allowed - lens * cost.lens)
    scale = room / (asked_rows - lens * cost.lens)
    gradcam = int(images * scale)
    if gradcam < classes:  # fewer than one image per class: not run; its rows go to the explained inputs
        gradcam = 0
        scale = room / (explained * cost.explained + (lesion or 0) * cost.lesioned)
    capped = replace(options, limit=min(explained, max(classes, int(explained * scale))), gradcam_sample=gradcam,
                     lesion_limit=None if lesion is None else min(lesion, max(classes, int(lesion * scale))))
    return Budgeted(capped, options, _rows(cost, capped, lens, tests), asked_rows, budget, trains + tests)


__all__ = ["ATTACH", "Budgeted", "ReportRows", "report_rows", "within_budget"]
