"""Your trained classifier, as it is: ``laya attach`` -> a setting folder the dashboard opens.

The user's network (a timm, torchvision or transformers architecture plus their weights file, or an
``nn.Module`` from Python) becomes a frozen backbone with its pre-logits features as the last layer
(:mod:`~laya.model.backbones.pre_logits`). Four heads read it, all written as
``OUT/<setting>/<head>/`` with the backbone stored once in ``OUT/<setting>/backbone.safetensors``:

* ``own`` — the network's own classifier with its exact weights (:func:`~laya.model.own_head.own_head`,
  a LastLayer head): it predicts what the network predicts; nothing is trained;
* ``laya``, ``scalarmix``, ``concat`` — depth-aware heads fitted on the same frozen features
  (:func:`~laya.training.train.train`, features computed and cached once).

Each is evaluated (:func:`~laya.training.bundle.bundle`: report, browser sample, expected outputs),
the setting's summary tables are written (:func:`~laya.training.suite.write_summary`), and the depth
analytics run (:func:`~laya.analysis.depth.report.run_depth`; a depth head's browser sample is written after its fit,
once, with its depth and detection columns: :func:`~laya.analysis.sample.write_sample`). Beside the own head the
network is explained by its own units (:func:`~laya.analysis.network.report.run_network`): its tuned lens, fitted
on the training split and stored with the command that made it (``tuned_lens.safetensors`` + ``.json``), and the
network report (``network.json`` + ``network.safetensors``). :func:`summary` is the one-screen verdict.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from torch import nn
from tqdm.auto import tqdm

from laya.analysis.depth.report import run_depth
from laya.analysis.network.gradcam_choice import choice_line
from laya.analysis.network.lens_fit import lens_line
from laya.analysis.network.report import run_network
from laya.analysis.network.report_files import load_network_report
from laya.analysis.network.scores import SCORE_LABELS, best_score
from laya.analysis.report import PER_INPUT_FILE, Report
from laya.analysis.sample import write_sample
from laya.analysis.statistics import bootstrap_ci, format_diff, holm, holm_verdict, paired_bootstrap, paired_verdict
from laya.data.datasets import Preprocess, load_dataset, split_indices
from laya.data.features import cached_hidden_states
from laya.model.checkpoint import CheckpointMeta, load_checkpoint, save_checkpoint, sha256_file
from laya.model.classifier import LayerwiseClassifier
from laya.model.devices import Placement, release_memory
from laya.model.heads import HEAD_LABELS, HeadConfig
from laya.model.own_head import OWN, own_head
from laya.model.sharding import scratch_unless_main, torchrun_placement
from laya.progress import progress_bar
from laya.training.attach_config import AttachConfig
from laya.training.bundle import bundle, export_examples
from laya.training.preflight import Checked, preflight
from laya.training.suite import results_table, write_summary
from laya.training.train import TrainConfig, train


@dataclass
class Attached:
    """The written setting folder and its head folders, ``own`` first; ``test_inputs`` of ``test_total`` were
    evaluated (fewer under ``evaluation.limit``: a class-balanced random sample drawn with ``seed``)."""

    setting: Path
    heads: dict[str, Path]
    test_inputs: int = 0
    test_total: int = 0
    seed: int = 0
    network_error: str | None = None  # why the network report was not written, where it was asked for
    network_said: tuple[str, ...] = ()  # what the network step said as it ran (its budget: budget.Budgeted.line)


def own_checkpoint(
    config: AttachConfig, out: str | Path, module: nn.Module | None = None, checked: Checked | None = None,
    device: str | torch.device = "cpu",
) -> Path:  # fmt: skip
    """The network with its own classifier as a LastLayer head (no training), reference vectors from the training
    split (the same cached features the fitted heads train on, computed on ``device``; under ``torchrun`` the pass
    is split between the processes), written to ``out``. ``checked``: what
    :func:`~laya.training.preflight.preflight` built (run here when not given); ``module``: a wrapped network."""
    from laya.model.backbones.transformers import WEIGHTS_FILE
    from laya.model.weights import split_entry

    checked = checked or preflight(config, module)
    data = load_dataset(config.dataset, "train", config.image_size)
    spec, bb_config, backbone = checked.spec, checked.backbone_config, checked.backbone
    model = LayerwiseClassifier(backbone, own_head(backbone)).eval().to(device)
    features = cached_hidden_states(backbone, Preprocess(spec).to(device), data, 256, "features (train split)",
                                    shard=True)  # fmt: skip
    train_idx, _ = split_indices(len(data), config.val_fraction, 0)
    model.head.set_references([h[train_idx].double().mean(0).float() for h in features])
    weights = Path(split_entry(config.weights)[0]) if config.weights else None
    if weights is not None and weights.is_dir():  # a Trainer's output folder: its weights file
        weights = weights / WEIGHTS_FILE
    source = {"family": config.family, "model": config.model, "weights": weights.name if weights else None,
              "weights_sha256": sha256_file(weights) if weights else None}  # fmt: skip
    meta = CheckpointMeta(
        backbone=bb_config, head=HeadConfig(name="lastlayer"), classes=data.classes, dataset=config.dataset,
        input=spec, seed=config.seed, train={OWN: source},
    )  # fmt: skip
    return save_checkpoint(model.cpu(), meta, out)


def attach(config: AttachConfig, module: nn.Module | None = None) -> Attached:
    """Write ``config.out/<setting>/{own,laya,scalarmix,concat}`` (see the module docstring); ``module``:
    the network for ``family="wrapped"``. Progress bars (tqdm) show each long step with its ETA.

    Under ``torchrun`` every process runs every step on its device (:func:`~laya.model.sharding.torchrun_placement`)
    and the passes that grow with the data are split between them: the feature pass, the evaluations' per-input
    work, the tuned lens's activations, the network report's inputs (:mod:`laya.model.sharding`). What follows
    them (the heads' fits on the cached features, the depth fits, the bootstraps) each process computes alike from
    the gathered rows; the main process writes ``config.out``, the others a temporary folder they delete, and all
    return the main process's folder once it is written. The setting is written whole or not at all
    (:func:`whole_folder`): a failed or interrupted attach leaves ``out`` as it was."""
    if (config.family == "wrapped") != (module is not None):
        raise ValueError("pass the nn.Module exactly when family='wrapped'")
    checked = preflight(config, module)  # seconds: every refusal before the first long step
    test = load_dataset(config.dataset, "test", config.image_size)
    name = config.setting_path(module).name
    place = torchrun_placement()
    place.barrier()  # every process has checked the destination before the main one creates the setting folder
    with scratch_unless_main(place, config.out) as out, whole_folder(Path(out) / name, config.overwrite) as setting:
        heads, network = _write_setting(config, module, checked, test, setting, place)
    place.barrier()  # the main process's folder is complete
    setting = Path(config.out) / name
    limit = config.evaluation.limit
    return Attached(setting, {h: setting / h for h in heads}, min(limit or len(test), len(test)), len(test),
                    config.evaluation.seed, *network)  # fmt: skip


def _write_setting(
    config: AttachConfig, module: nn.Module | None, checked: Checked, test: Any, setting: Path, place: Placement
) -> tuple[list[str], tuple[str | None, tuple[str, ...]]]:
    """Every step of :func:`attach` into ``setting`` on ``place.device``: the heads written (``own`` first), and why
    the network report was not written, where it was asked for and could not be, and what its step said."""
    spec, bb_config, device = checked.spec, checked.backbone_config, place.device
    alone = None if place.world == 1 else Placement(device=device)  # each process fits the heads by itself
    network_step = config.network is not None
    steps = tqdm(total=2 + network_step + len(config.heads) + len(config.depth_heads), desc=f"attach {setting.name}",
                 unit="step")  # fmt: skip
    heads: dict[str, Path] = {}
    network: tuple[str | None, tuple[str, ...]] = (None, ())

    def advance() -> None:  # a step done: what it freed given back before the next one
        release_memory(device)
        steps.update()

    try:  # the bar is closed (its line ended) before any error is printed
        with whole_folder(setting, config.overwrite), tempfile.TemporaryDirectory(prefix="laya-attach-") as runs:
            export_examples(test, setting / "examples")  # before any head is bundled: its expected.json reads them
            steps.set_postfix_str("own head")
            run = own_checkpoint(config, Path(runs) / OWN, module, checked, device)
            heads[OWN] = bundle(run, setting / OWN, test, config.evaluation, progress_bar(f"evaluating {OWN}", False),
                                module=module, sample=OWN not in config.depth_heads,
                                device=device)  # a depth head's sample: after its depth analytics
            advance()
            if network_step:
                steps.set_postfix_str("tuned lens and network report")
                network = _network(config, heads[OWN], test, module, device)
                advance()
            for head in config.heads:
                steps.set_postfix_str(f"fitting {head}")
                recipe = TrainConfig(
                    dataset=config.dataset, backbone=bb_config, head=HeadConfig(name=head), seed=config.seed,
                    out=str(Path(runs) / head), lr=config.lr, patience=config.patience, max_epochs=config.max_epochs,
                    val_fraction=config.val_fraction, batch_size=config.batch_size, image_size=config.image_size,
                    mean=list(spec.mean), std=list(spec.std),
                )  # fmt: skip
                fitted = train(recipe, module=module, alone=alone)
                heads[head] = bundle(fitted, setting / head, test, config.evaluation,
                                     progress_bar(f"evaluating {head}", False), module=module,
                                     sample=head not in config.depth_heads, device=device)  # fmt: skip
                advance()
        write_summary(results_table(list(heads.values())), setting, f"{setting.name}: the network's own head and "
                      "LAYA, ScalarMix, Concat on its frozen features", list(heads.values()))  # fmt: skip
        advance()
        for head in config.depth_heads:
            steps.set_postfix_str(f"depth analytics of {head}")
            checkpoint = load_checkpoint(heads[head], map_location=device, module=module)
            run_depth(checkpoint, config.depth, progress_bar(f"depth analytics of {head}", False))
            mode = Report.load(heads[head]).data["headline"]["mode"]
            write_sample(checkpoint, test, mode=mode, images_dir=setting)  # with depth and detection columns
            advance()
    finally:
        steps.close()
    return list(heads), network


@contextlib.contextmanager
def whole_folder(folder: Path, overwrite: bool = False) -> Iterator[Path]:
    """``folder``, written by the block whole or not at all. The block writes it in place (the reports record
    their folder's path); should it raise, ``KeyboardInterrupt`` included, what it wrote is removed and the folder
    that was there before, moved aside under a hidden name beside it, is put back; only once it has finished is
    that earlier folder deleted. An existing ``folder`` needs ``overwrite``
    (:func:`~laya.training.preflight.preflight` refuses it first, in words)."""
    if folder.exists() and not overwrite:
        raise FileExistsError(f"{folder} exists; pass overwrite=True to replace it")
    folder.parent.mkdir(parents=True, exist_ok=True)
    earlier = None
    if folder.exists():
        earlier = Path(tempfile.mkdtemp(prefix=f".{folder.name}.laya-attach-earlier-", dir=folder.parent))
        folder.rename(earlier / folder.name)
    try:
        yield folder
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        if earlier is not None:
            (earlier / folder.name).rename(folder)
            earlier.rmdir()
        raise
    if earlier is not None:
        shutil.rmtree(earlier)


def _network(
    config: AttachConfig, own: Path, test: Any, module: nn.Module | None, device: str | torch.device = "cpu"
) -> tuple[str | None, tuple[str, ...]]:
    """The tuned lens and the network report in the own head's folder: the reason where the network cannot be
    read unit by unit (the rest of ``attach`` goes on), and what :func:`run_network` said (what the report's budget
    allowed: printed above the bar as it starts, and returned for the summary)."""
    command = config.command or f"laya.training.attach.attach(family={config.family!r}, model={config.model!r})"
    checkpoint = load_checkpoint(own, map_location=device, module=module)
    said: list[str] = []

    def log(line: str) -> None:
        tqdm.write(line)
        said.append(line)

    try:
        run_network(checkpoint, config.network, command, refit=True, test_images=test,
                    train_images=load_dataset(config.dataset, "train", config.image_size), log=log)  # fmt: skip
    except ValueError as error:  # NoLayerModules too: a network with no units to read
        return str(error), ()
    return None, tuple(said)


def comparison_words(low: float, high: float, adjusted_p: float) -> str:
    """The verdict of a difference whose printed CI is ``[low, high]`` (uncorrected) and whose Holm-adjusted p is
    ``adjusted_p``, in words that agree with that CI: ``better`` / ``worse`` (the CI excludes 0 and adjusted
    p <= 0.05), ``tie`` (the CI covers 0), or ``significant before correction, not after``."""
    direction = paired_verdict(low, high)
    if direction == "tie":
        return "tie"
    if holm_verdict(low, high, adjusted_p) == "tie":
        return "significant before correction, not after"
    return {"higher": "better", "lower": "worse"}[direction]


def sample_words(attached: Attached) -> str:
    """``200 test inputs (a class-balanced random sample of the 1,000, seed 0)``, or ``1,000 test inputs``."""
    if attached.test_inputs >= attached.test_total:
        return f"{attached.test_inputs:,} test inputs"
    return (f"{attached.test_inputs:,} test inputs (a class-balanced random sample of the {attached.test_total:,}, "
            f"seed {attached.seed})")  # fmt: skip


def summary(attached: Attached, resamples: int = 1000) -> str:
    """One screen: each head's test accuracy with its 95 % bootstrap CI and its paired difference to the
    network's own head with its 95 % CI, Holm-corrected over the heads compared (:func:`comparison_words`: the
    verdict never contradicts the interval printed); LAYA's mean α per layer (largest first); the command that
    opens the dashboard."""
    correct = {h: load_file(str(p / PER_INPUT_FILE))["correct"].double() for h, p in attached.heads.items()}
    tests = {h: paired_bootstrap(v, correct[OWN], resamples=resamples) for h, v in correct.items() if h != OWN}
    adjusted = dict(zip(tests, holm([t.p_value for t in tests.values()])))
    lines = [f"{attached.setting}: {sample_words(attached)}; accuracy [95 % bootstrap CI]; against the own head "
             f"a paired bootstrap [95 % CI], Holm-corrected over the {len(tests)}", ""]  # fmt: skip
    for head, values in correct.items():
        acc = bootstrap_ci(values, resamples=resamples)
        label = "own head (the network as it is)" if head == OWN else HEAD_LABELS[head]
        line = f"  {label:<32} {acc.estimate:.3f} [{acc.low:.3f}, {acc.high:.3f}]"
        if head != OWN:
            d = tests[head].difference
            verdict = comparison_words(d.low, d.high, adjusted[head])
            line += f"   vs own {format_diff(d.estimate, d.low, d.high)} ({verdict}, Holm p = {adjusted[head]:.2g})"
        lines.append(line)
    if "laya" in attached.heads:
        profile = Report.load(attached.heads["laya"]).layer_profile()
        alpha = profile[profile["method"] == "laya_alpha"].sort_values("mean", ascending=False)
        top = ", ".join(f"{r.layer} {r.mean:.2f}" for r in alpha.itertuples())
        lines += ["", f"LAYA attends to (mean α over test inputs): {top}"]
    lines += network_lines(attached, resamples)
    lines += ["", "Open it in the dashboard:", f"  laya dashboard --models {attached.setting.parent}"]
    return "\n".join(lines)


def network_lines(attached: Attached, resamples: int = 1000) -> list[str]:
    """The network report in a few lines: what its step said (its budget), the tuned lens's agreement with the
    network's prediction at every unit (:func:`~laya.analysis.network.lens_fit.lens_line`), the cheap score whose
    per-input Spearman with the default intervention is highest among those that beat the better baseline of
    structure alone (:func:`~laya.analysis.network.scores.best_score`), or that none does, and the unit whose
    Grad-CAM to use (:func:`~laya.analysis.network.gradcam_choice.choice_line`) where the report tested them."""
    if attached.network_error:
        return ["", f"Network report not written: {attached.network_error}"]
    report = load_network_report(attached.heads[OWN]) if OWN in attached.heads else None
    if report is None:
        return []
    lines = ["", *attached.network_said, lens_line(report.units, report.lens_agrees, report.lens.get("fit", {}))]
    best = best_score(report.agreement, report.method)
    if best is None:
        lines.append(f"No cheap per-unit score is to be trusted against {report.method}: none beats what structure "
                     "alone gives (the per-unit mean drop, a random score) on the same inputs")  # fmt: skip
    else:
        lines.append(f"Cheap score to trust against {report.method}: {SCORE_LABELS[best['score']]}, per-input "
                     f"Spearman {best['spearman_mean']:.2f} [{best['ci_low']:.2f}, {best['ci_high']:.2f}], above the "
                     f"better baseline by {best['vs_baseline']:.2f} "
                     f"[{best['vs_low']:.2f}, {best['vs_high']:.2f}]")  # fmt: skip
    if report.gradcam is not None:
        lines.append(choice_line(report.gradcam))
    return lines


__all__ = [
    "AttachConfig", "Attached", "attach", "comparison_words", "network_lines", "own_checkpoint", "sample_words",
    "summary", "whole_folder",
]  # fmt: skip
