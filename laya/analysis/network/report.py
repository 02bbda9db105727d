"""The network report: the attached network explained by its own units, on a sample of the test split.

:func:`network_report` runs, for a checkpoint whose head is the network's own classifier (``laya attach``'s
``own`` head), over a seeded class-balanced sample of ``options.limit`` test inputs:

* every unit intervened on (:func:`~laya.analysis.network.interventions.intervene`) by ``options.method``, and by
  ``skip`` too where some units are residual, on ``options.branch`` (a transformer block's attention or MLP branch
  alone, or the whole block); the ``K = options.references`` reference inputs are drawn ONCE from
  the training split (:func:`~laya.analysis.network.interventions.reference_inputs`: seeded, class-balanced) and
  serve the interventions and the integrated-gradients baseline alike;
* the tuned lens (:mod:`~laya.analysis.network.lens`): loaded from beside the checkpoint, else fitted on a seeded
  class-balanced sample of ``options.lens_sample`` training inputs (:func:`fitted_lens`), and summarised per unit
  on the test sample beside the logit lens (where it applies) and the best constant distribution;
* the cheap per-unit scores (:mod:`~laya.analysis.network.scores`) and their agreement with the interventions over
  the units that keep the input, beside two baselines that know nothing of the input: the per-unit mean drop of the
  same intervention on the reference inputs, and a seeded random score; a score is trusted only where it beats the
  better of them.

Stored beside the checkpoint as ``network.json`` + ``network.safetensors`` (:mod:`~laya.analysis.network.report_files`:
every field, its shape and its file; :func:`~laya.analysis.network.report_files.load_network_report` reads them
back as untrusted input).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import torch
from torch import Tensor

from laya.analysis.depth.layer_lens import Lens
from laya.analysis.depth.readouts import class_groups
from laya.analysis.network.budget import within_budget
from laya.analysis.network.gradcam_choice import REPEATS, SAMPLE, sampled_gradcam_choice
from laya.analysis.network.interventions import (
    BRANCHES,
    DEFAULT,
    NAMES,
    RESAMPLES,
    Branch,
    Method,
    branched,
    intervene,
    method_label,
    record_references,
    reference_inputs,
)
from laya.analysis.network.lens import (
    EPOCHS,
    LR,
    PATIENCE,
    TunedLens,
    TunedLensConfig,
    load_tuned_lens,
    own_readout,
    prediction_depth,
    save_tuned_lens,
    unit_lens,
)
from laya.analysis.network.lens_fit import fit_tuned_lens, lens_summary
from laya.analysis.network.lesion import DRAWS, lesion_batch, lesion_masks, lesion_study, skippable
from laya.analysis.network.recording import as_network
from laya.analysis.network.report_files import NetworkReport, load_network_report, write_network_report
from laya.analysis.network.scores import (
    IG_STEPS,
    SCORES,
    Baseline,
    baseline_scores,
    baselines,
    trusted_agreement,
    unit_scores,
)
from laya.analysis.network.stored_references import write_references
from laya.analysis.network.units import Unit, network_units
from laya.analysis.sample import sample_indices
from laya.data.datasets import Images, batch_indices
from laya.model.attached_files import (
    AttachedFileError,
)
from laya.model.checkpoint import Checkpoint
from laya.model.devices import model_device
from laya.model.hooks import pass_rows
from laya.model.sharding import Shard

TABLE_METRICS = ("lens_prob", "lens_kl", "lens_agrees", "drops")


@dataclass
class NetworkOptions:
    """What the network report computes: ``limit`` test inputs (a class-balanced sample drawn with ``seed``; None:
    all), ``references`` K training inputs (resample and the IG baseline), the default intervention ``method`` and
    the ``branch`` it and skip act on (``"block"``, ``"attention"``, ``"mlp"``: a transformer block's one branch),
    ``ig_steps`` and ``baseline`` of integrated gradients, ``batch_size`` inputs per pass (at most: fewer where
    their activations would not fit, :func:`_batch_size`), ``resamples`` of every
    bootstrap CI; the tuned lens's fit when none is stored: ``lens_sample`` training inputs, ``lens_epochs`` the
    cap on its epochs, ``lens_lr``, ``lens_patience`` (:class:`~laya.analysis.network.lens.TunedLensConfig`);
    ``lesion_draws`` random sets of units per ``k`` in the lesion study (:mod:`~laya.analysis.network.lesion`) and its
    inputs, ``lesion_limit``: None the report's sample, ``"all"`` the whole test split, N a class-balanced sample;
    ``gradcam_sample`` test images of the per-unit Grad-CAM test (:mod:`~laya.analysis.network.gradcam_choice`;
    0: none) and ``timing_repeats`` timed rounds of its per-unit costs; ``budget``: forward passes over the
    training and test images the report may cost, its samples capped to fit (:mod:`~laya.analysis.network.budget`;
    0: no cap, the sizes as given)."""

    limit: int | None = 200
    references: int = RESAMPLES
    method: Method = DEFAULT
    branch: Branch = "block"
    ig_steps: int = IG_STEPS
    baseline: Baseline = "mean"
    batch_size: int = 16
    resamples: int = 1000
    seed: int = 0
    lens_sample: int = 2000
    lens_epochs: int = EPOCHS
    lens_lr: float = LR
    lens_patience: int = PATIENCE
    lesion_draws: int = DRAWS
    lesion_limit: int | Literal["all"] | None = None
    gradcam_sample: int = SAMPLE
    timing_repeats: int = REPEATS
    budget: float = 0.0

    def __post_init__(self) -> None:
        if self.method not in NAMES or self.branch not in BRANCHES:
            raise ValueError(f"method must be one of {sorted(NAMES)} and branch one of {sorted(BRANCHES)}; got "
                             f"{self.method!r}, {self.branch!r}")  # fmt: skip
        sizes = ("references", "ig_steps", "batch_size", "resamples", "lens_sample", "lesion_draws", "timing_repeats")
        small = {k: v for k, v in asdict(self).items() if k in sizes and v < 1}
        lesion = self.lesion_limit in (None, "all") or (isinstance(self.lesion_limit, int) and self.lesion_limit >= 1)
        if (small or (self.limit is not None and self.limit < 1) or self.lens_epochs < 0 or self.lens_patience < 1
                or self.gradcam_sample < 0 or not lesion or not self.budget >= 0):  # fmt: skip
            raise ValueError(f"network report sizes must be positive (lens_epochs, gradcam_sample, budget >= 0, "
                             f"lens_patience >= 1, lesion_limit a count, 'all' or None); got "
                             f"{small or asdict(self)}")  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NetworkOptions:
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown network report options {sorted(unknown)}")
        return cls(**data)


def _read(data: Images, index: Tensor, batch_size: int = 256) -> Iterator[Tensor]:
    """The images ``index`` of ``data``, ``uint8`` batches of ``batch_size`` in order (a streamed split read so)."""
    return data.iter_batches(index[b] for b in batch_indices(len(index), batch_size))


def _preprocessed(checkpoint: Checkpoint, data: Images, index: Tensor) -> Tensor:
    """``float (len(index), C, H, W)`` preprocessed on the CPU, read in batches."""
    return torch.cat([checkpoint.preprocess(b).cpu() for b in _read(data, index)])


def fitted_lens(checkpoint: Checkpoint, train: Images, options: NetworkOptions, command: str = "") -> TunedLens:
    """A tuned lens of the checkpoint's network on its units, fitted on a seeded class-balanced sample of
    ``options.lens_sample`` training inputs, a class-balanced part of it held out to stop the fit
    (:func:`~laya.analysis.network.lens_fit.fit_tuned_lens`, which reads the split batch by batch: its images are
    never copied whole)."""
    backbone = checkpoint.model.backbone
    config = TunedLensConfig([], [], 1, 1, sample=min(options.lens_sample, len(train)), epochs=options.lens_epochs,
                             lr=options.lens_lr, patience=options.lens_patience, seed=options.seed)  # fmt: skip
    units = [u.name for u in network_units(backbone)]
    return fit_tuned_lens(backbone, train, units, train.labels, config, command, checkpoint.preprocess)


def _lens_for(checkpoint: Checkpoint, units: Sequence[Unit], lens: TunedLens | None) -> TunedLens:
    lens = lens or load_tuned_lens(checkpoint.path, checkpoint.model.backbone, [u.name for u in units])
    if lens is None:
        raise ValueError(f"no tuned lens beside {checkpoint.path}: fit one (fitted_lens, or `laya network`)")
    if lens.config.units != [u.name for u in units]:  # a lens given, not read
        raise ValueError(f"the tuned lens was fitted for units {lens.config.units}; the network's are "
                         f"{[u.name for u in units]} (refit it: `laya network --refit-lens`)")  # fmt: skip
    return lens.to(model_device(checkpoint.model))


def _table(values: Tensor, groups: Tensor, classes: Sequence[str], units: Sequence[str]) -> pd.DataFrame:
    rows = {name: [*values[chosen].double().mean(0).tolist(), int(chosen.sum())]
            for name, chosen in class_groups(groups, classes)}  # fmt: skip
    return pd.DataFrame.from_dict(rows, orient="index", columns=[*units, "n"]).rename_axis("class")


def _batch_size(checkpoint: Checkpoint, test: Images, index: Tensor, options: NetworkOptions, units: int) -> int:
    """Inputs per batch of the report: ``options.batch_size``, fewer where the resample pass's rows (each input's
    own and its ``K`` references at every unit, joined in one pass) would hold an activation over
    :data:`~laya.model.hooks.PASS_BYTES` (:func:`~laya.model.hooks.pass_rows`, counting every row at the input's
    size: 16 inputs at 32 px, one at 224 px, where 16 held a gigabyte more)."""
    rows = 1 + options.references * units
    first = _preprocessed(checkpoint, test, index[:1]).to(model_device(checkpoint.model))
    fit = pass_rows(checkpoint.model.backbone, first, options.batch_size * rows)
    return max(1, min(options.batch_size, fit // rows))


def _bar(batches: Sequence[Tensor], shard: Shard, desc: str) -> Iterator[Tensor]:
    """This process's batches under a transient tqdm bar labelled ``desc`` (rank 0's alone under torchrun)."""
    from tqdm.auto import tqdm

    run = shard.run
    for b in tqdm(run, total=len(run), desc=desc, unit="batch", leave=False, disable=shard.rank != 0):
        yield batches[b]


def network_report(
    checkpoint: Checkpoint, test_images: Images | None = None, train_images: Images | None = None,
    options: NetworkOptions | None = None, lens: TunedLens | None = None, command: str = "",
) -> NetworkReport:  # fmt: skip
    """The network report (module docstring) of ``checkpoint`` (its head the network's own classifier) on
    ``test_images`` (default its test split), references from ``train_images`` (default its training split);
    ``lens`` the tuned lens (default: the one stored beside the checkpoint).

    Raises:
        ValueError: no tuned lens given or stored, or one fitted for other units; the backbone has no units.
    """
    options = options or NetworkOptions()
    test = test_images if test_images is not None else checkpoint.load_data("test")
    train = train_images if train_images is not None else checkpoint.load_data("train")
    model = checkpoint.model.eval()
    backbone, device = model.backbone, model_device(model)
    units = network_units(backbone)
    names = [u.name for u in units]
    tuned = _lens_for(checkpoint, units, lens)
    logit_applies = own_readout(as_network(backbone)).space == "residual"  # the units write where the classifier reads
    reference = checkpoint.preprocess(reference_inputs(train, options.references, options.seed)).to(device)
    baseline = baselines(backbone, reference, units, options.baseline)
    recorded = record_references(model, units, reference, options.branch)  # once, for every batch
    residual = [u.residual for u in units]
    skips = skippable(model, reference, units)  # residual, or no shortcut and the input's shape: its input passed on
    masks, ks = lesion_masks(skips, options.lesion_draws, options.seed)
    structure = {"main": intervene(model, reference, units, options.method, recorded, branch=options.branch).drops}
    if any(residual):  # the per-unit mean drop over the references: what structure alone gives
        structure["skip"] = intervene(model, reference, units, "skip", recorded, branch=options.branch).drops
    structure = {k: v.mean(0).cpu() for k, v in structure.items()}
    index = sample_indices(test.labels, options.limit or len(test), options.seed)
    parts: dict[str, list[Tensor]] = {}
    methods: dict[str, tuple[str, ...]] = {}

    def keep(**tensors: Tensor) -> None:
        for k, v in tensors.items():
            parts.setdefault(k, []).append(v.detach().cpu())

    batch_size = _batch_size(checkpoint, test, index, options, len(units))
    batches = batch_indices(len(index), batch_size)
    shard = Shard.of(batches)  # under torchrun: this process's batches, gathered back in order below
    for batch in _bar(batches, shard, "network report: profiles, lens, scores"):
        x = _preprocessed(checkpoint, test, index[batch]).to(device)
        profile = intervene(model, x, units, options.method, recorded, branch=options.branch)
        methods["main"] = profile.methods
        keep(drops=profile.drops, predictions=profile.prediction, probability=profile.probability)
        profiles = {options.method: profile}
        if any(residual):
            profiles["skip"] = skip = intervene(model, x, units, "skip", recorded, branch=options.branch)
            methods["skip"] = skip.methods
            keep(skip_drops=skip.drops)
        if options.lesion_limit is None:  # the lesion study on the same inputs, their profiles reused
            lesioned, lesion_methods = lesion_batch(model, x, units, recorded, masks, skips, options.branch, profiles)
            keep(**{f"lesion_{k}": v for k, v in lesioned.items()})
        lens_b = unit_lens(backbone, x, names, tuned)
        keep(log_q=lens_b.log_q, log_p=lens_b.log_p)
        if logit_applies:
            keep(logit_log_q=unit_lens(backbone, x, names).log_q)
        for name, value in unit_scores(backbone, x, units, lens_b, baseline, options.ig_steps).items():
            keep(**{f"scores/{name}": value.double()})
    got = {k: shard.gather(parts[k]) for k in sorted(parts)}
    lesion_index = index
    if options.lesion_limit is not None:  # the lesion study's own sample: its inputs' passes, nothing else
        size = len(test) if options.lesion_limit == "all" else options.lesion_limit
        lesion_index, parts = sample_indices(test.labels, size, options.seed), {}
        batches = batch_indices(len(lesion_index), batch_size)
        shard = Shard.of(batches)
        for batch in _bar(batches, shard, "lesion study"):
            x = _preprocessed(checkpoint, test, lesion_index[batch]).to(device)
            lesioned, lesion_methods = lesion_batch(model, x, units, recorded, masks, skips, options.branch)
            keep(**{f"lesion_{k}": v for k, v in lesioned.items()})
        got |= {k: shard.gather(parts[k]) for k in sorted(parts)}
    whole = Lens(got["log_q"], got["log_p"], lens_b.source)
    predictions, labels = got["predictions"].long(), test.labels[index].long()
    lens_class = whole.log_q.argmax(-1)
    scores = {name: got[f"scores/{name}"] for name in SCORES}
    part = options.branch if options.branch != "block" and branched(units) else None  # a CNN: no part to name
    method = method_label(options.method, part)
    keeps = torch.tensor(residual)  # agreement over the units that keep the input, beside baselines of structure alone
    agreement = [trusted_agreement(scores, baseline_scores(structure["main"], len(index), options.seed), got["drops"],
                                   method, keeps, options.resamples, options.seed)]  # fmt: skip
    if "skip_drops" in got and sum(residual) >= 2:
        agreement.append(trusted_agreement(scores, baseline_scores(structure["skip"], len(index), options.seed),
                                           got["skip_drops"], method_label("skip", part), keeps, options.resamples,
                                           options.seed))  # fmt: skip
    classes = list(checkpoint.meta.classes)
    values = {"lens_prob": whole.prob, "lens_kl": whole.kl, "lens_agrees": (lens_class == predictions.view(-1, 1)),
              "drops": got["drops"]}  # fmt: skip
    tables = {f"{metric}/{kind}": _table(v, groups, classes, names) for metric, v in values.items()
              for kind, groups in (("true", labels), ("predicted", predictions))}  # fmt: skip
    report = NetworkReport(
        units=names, stages=[u.layer for u in units], stage_names=[u.stage for u in units], residual=residual,
        method=method, methods=list(methods["main"]), classes=classes, indices=index.long(),
        labels=labels, predictions=predictions, probability=got["probability"].double(), drops=got["drops"].double(),
        lens_kl=whole.kl.double(), lens_prob=whole.prob.double(), lens_class=lens_class,
        lens_agrees=lens_class == predictions.view(-1, 1), prediction_depth=prediction_depth(whole).long(),
        scores=scores, agreement=pd.concat(agreement, ignore_index=True), tables=tables,
        skip_drops=got["skip_drops"].double() if "skip_drops" in got else None,
        skip_methods=list(methods.get("skip", ())), references=len(reference), options=options.to_dict(),
        command=command,
    )  # fmt: skip
    logit = Lens(got["logit_log_q"], got["log_p"], "logit lens") if "logit_log_q" in got else None
    constant = tuned.config.fit.get("constant")  # absent from a lens stored before early stopping
    summary = lens_summary(whole, names, None if constant is None else torch.tensor(constant), logit)
    lesioned = {k: got[f"lesion_{k}"] for k in ("skip", "resample") if f"lesion_{k}" in got}
    curve = got["lesion_curve"].T if "lesion_curve" in got else None  # (M, N)
    report.lesion = lesion_study(test.labels[lesion_index].long(), got["lesion_predictions"].long(), lesioned,
                                 lesion_methods, curve, ks, names, classes, options.resamples,
                                 options.seed)  # fmt: skip
    report.lens = {"source": whole.source, "command": tuned.config.command, "fit": tuned.config.fit,
                   "units": summary.to_dict(orient="records")}  # fmt: skip
    if options.gradcam_sample:
        report.gradcam = sampled_gradcam_choice(backbone, checkpoint.preprocess, test, names, options.gradcam_sample,
                                                options.seed, options.resamples, options.batch_size,
                                                options.timing_repeats)  # fmt: skip
    return report


def run_network(
    checkpoint: Checkpoint, options: NetworkOptions | None = None, command: str = "", refit: bool = False,
    test_images: Images | None = None, train_images: Images | None = None, dest: str | Path | None = None,
    write: bool = True,
    log: Callable[[str], None] = print,
) -> NetworkReport:  # fmt: skip
    """Cap the report's samples to ``options.budget`` (:func:`~laya.analysis.network.budget.within_budget`; ``log``
    says what it allowed), fit the tuned lens where none is stored (or ``refit``) and save it beside the checkpoint
    with ``command``, store the dashboard's reference inputs (:func:`write_references`), then compute the network
    report and write it to ``dest`` (default the checkpoint's folder); an earlier one there that does not read is
    replaced, and ``log`` says so, naming the file and why. ``write=False``: compute only (the other processes of a
    ``torchrun`` run, whose main process writes)."""
    options = options or NetworkOptions()
    dest = Path(dest or checkpoint.path)
    units = [u.name for u in network_units(checkpoint.model.backbone)]
    lens = None if refit else load_tuned_lens(dest, checkpoint.model.backbone, units)  # refused before any work
    train = train_images if train_images is not None else checkpoint.load_data("train")
    test = test_images if test_images is not None else checkpoint.load_data("test")
    if options.budget:
        sized = within_budget(options, len(units), len(checkpoint.meta.classes), len(train), len(test), options.budget)
        if write:
            log(sized.line())
        options = sized.options
    if lens is None:
        lens = fitted_lens(checkpoint, train, options, command)
        if write:
            save_tuned_lens(lens, dest)
    if write:
        write_references(dest, train)
    earlier = _earlier(dest, log if write else (lambda _: None))  # the main process says it
    report = network_report(checkpoint, test, train, options, lens, command)
    if earlier is not None:  # a report rewritten in a setting made by another command keeps that command
        report.setting_command = earlier.setting_command or earlier.command
    if write:
        write_network_report(checkpoint, report, dest)
    return report


def _earlier(dest: Path, log: Callable[[str], None]) -> NetworkReport | None:
    """The report already in ``dest`` (None where there is none, or where it is broken: it is being replaced)."""
    try:
        return load_network_report(dest)
    except AttachedFileError as error:
        log(f"The network report already there cannot be read and is replaced: {error}")
        return None

