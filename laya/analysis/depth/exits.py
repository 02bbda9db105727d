"""Early exit: a real early-exit run measured against plain inference, and the per-input estimate.

**The run** (:func:`early_exit`, measured by :func:`exit_runs`): the backbone advances one layer at a time
(:func:`layer_steps`); at layer ``k < L`` every input still in the batch gets its exit classifier's logits
(:class:`ExitHeads`: the head's readouts, linear probes, or exits trained for exiting); the inputs the policy
lets go (:func:`confidence_policy`: ``max_c p_k(c | x) >= t``; :func:`alpha_profile_policy`) leave the batch with
that prediction, the others go on; whoever reaches layer ``L`` gets the head's prediction, exactly ``model(x)``.
Savings are wall-clock time (fastest of N, alternating with plain inference) and MACs
(``torch.utils.flop_counter``), both end to end, exit classifiers included.

**The estimate** (``depth.json``'s exit curve: :func:`layer_costs`, :func:`exit_curve`, :func:`compute_saved`):
per-input arithmetic on the measured time of ``Backbone.forward_to(x, k)`` as a fraction of the full model,
exit classifiers not counted. It is labelled an estimate wherever it is shown; the savings quoted are the run's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode

from laya.analysis.depth.readouts import LayerProbes
from laya.analysis.statistics import bootstrap_ci, bootstrap_cis, paired_bootstrap, verdict
from laya.analysis.timing import fastest_seconds
from laya.model.backbones import Backbone, CNNBackbone, MLPBackbone, TimmBackbone
from laya.model.classifier import LayerwiseClassifier
from laya.model.heads import LayerHead, MixHead

THRESHOLDS: tuple[float, ...] = tuple(np.round(np.concatenate([np.linspace(0.5, 0.95, 10), [0.97, 0.99, 0.995, 0.999, 1.01]]), 4))  # fmt: skip


def exit_layers(confidence: Tensor, thresholds: Tensor) -> Tensor:
    """``(T, B)`` 0-based layer each input exits at for each threshold; ``L`` = no exit (the full head).

    ``confidence``: ``(B, L)`` readout confidence per layer; ``thresholds``: ``(T,)``.
    """
    L = confidence.shape[1]
    confident = confidence.unsqueeze(0) >= thresholds.to(confidence).view(-1, 1, 1)  # (T, B, L)
    first = torch.where(confident.any(-1), confident.double().argmax(-1), torch.full_like(confident[..., 0], L, dtype=torch.long))  # fmt: skip
    return first.long()


def exit_predictions(readout_classes: Tensor, final: Tensor, layers: Tensor) -> Tensor:
    """``(T, B)`` the class predicted at each exit: the readout at ``layers`` or ``final`` where ``layers = L``."""
    T = layers.shape[0]
    extended = torch.cat([readout_classes, final.unsqueeze(1)], dim=1)  # (B, L + 1)
    return extended.unsqueeze(0).expand(T, -1, -1).gather(2, layers.unsqueeze(-1))[..., 0]


TIMED_SECONDS = 0.25  # a timed run of the full model lasts at most about this long (timed_batch)


@torch.inference_mode()
def timed_batch(model: LayerwiseClassifier, x: Tensor) -> Tensor:
    """The first rows of the preprocessed batch ``x`` that :func:`layer_costs` times: as many as keep one full
    forward of them within :data:`TIMED_SECONDS` (measured on one row after its warm-up), at least one: all of a
    small input's batch, a few of a 224 px one, whose per-input costs a larger batch would lengthen, not change."""
    if len(x) == 0:
        raise ValueError("the timed batch needs at least one input")
    one = fastest_seconds([lambda: model(x[:1])], 1, x.device)[0]
    return x[: max(1, min(len(x), int(TIMED_SECONDS / one)))] if one > 0 else x


@torch.inference_mode()
def layer_costs(model: LayerwiseClassifier, x: Tensor, repeats: int = 7) -> Tensor:
    """``(L + 1,)`` measured seconds per input: ``forward_to`` layer k (k < L) and the full model (k = L).

    ``x``: a preprocessed batch on the model's device (:func:`timed_batch` sizes it). After one warm-up of each,
    the runs are timed round-robin ``repeats`` times and the fastest time of each is kept (robust to other load on
    the machine).
    """
    if repeats < 1 or len(x) == 0:
        raise ValueError(f"need repeats >= 1 and a non-empty batch, got {repeats} and {len(x)} inputs")
    runs = [lambda k=k: model.backbone.forward_to(x, k) for k in range(len(model.layer_names))] + [lambda: model(x)]
    return torch.tensor(fastest_seconds(runs, repeats, x.device), dtype=torch.float64) / len(x)


def exit_curve(
    readout_probs: Tensor,
    final: Tensor,
    labels: Tensor,
    cost: Tensor,
    thresholds: Sequence[float] = THRESHOLDS,
    resamples: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Per threshold: ``accuracy`` (95 % bootstrap CI), ``mean_depth`` (layers run, 1..L), ``cost``
    (mean measured time as a fraction of the full model) and ``exited`` (share that stopped early).

    ``readout_probs``: ``(B, L, C)``; ``final``/``labels``: ``(B,)``; ``cost``: ``(L + 1,)`` from
    :func:`layer_costs`.
    """
    L = readout_probs.shape[1]
    t = torch.tensor(list(thresholds), dtype=torch.float64)
    layers = exit_layers(readout_probs.amax(-1), t)  # (T, B)
    correct = (exit_predictions(readout_probs.argmax(-1), final, layers) == labels.unsqueeze(0)).double()
    fraction = (cost / cost[-1]).to(layers.device)[layers]  # (T, B)
    accuracy = bootstrap_cis(correct.T.cpu(), resamples=resamples, seed=seed)  # rows = inputs
    return pd.DataFrame(
        {
            "threshold": t.tolist(),
            "accuracy": [a.estimate for a in accuracy],
            "accuracy_low": [a.low for a in accuracy],
            "accuracy_high": [a.high for a in accuracy],
            "mean_depth": (layers.clamp(max=L - 1) + 1).double().mean(1).tolist(),
            "cost": fraction.mean(1).tolist(),
            "exited": (layers < L).double().mean(1).tolist(),
        }
    )


def compute_saved(curve: pd.DataFrame, full_accuracy: float, tolerance: float = 0.01) -> dict[str, float]:
    """The cheapest threshold whose accuracy is within ``tolerance`` (1 point) of ``full_accuracy``:
    its threshold, accuracy, mean depth, cost and ``saved = 1 - cost`` (0 if no threshold qualifies)."""
    ok = curve[curve["accuracy"] >= full_accuracy - tolerance]
    if ok.empty:
        return {"threshold": float("nan"), "accuracy": full_accuracy, "mean_depth": float("nan"), "cost": 1.0,
                "saved": 0.0}  # fmt: skip
    best = ok.loc[ok["cost"].idxmin()]
    return {
        "threshold": float(best["threshold"]),
        "accuracy": float(best["accuracy"]),
        "mean_depth": float(best["mean_depth"]),
        "cost": float(best["cost"]),
        "saved": float(1 - best["cost"]),
    }


# ---------------------------------------------------------------------------------------------------------------
# A real early-exit run (issue 18 §1): the backbone advances one layer at a time, every remaining input's exit
# classifier is evaluated, inputs that exit leave the batch, the survivors go on; whoever reaches the last layer
# gets the full head. Savings are measured end to end against plain inference (wall clock and MACs).
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class LayerSteps:
    """A backbone run one layer at a time: ``state = prelude(x)``, then per layer ``k``
    ``state = advance[k](state)`` and ``h_k = read[k](state)`` ``(B, d_k)``. States are batch-first, so
    rows of inputs that exit are dropped by indexing."""

    prelude: Callable[[Tensor], Tensor]
    advance: list[Callable[[Tensor], Tensor]]
    read: list[Callable[[Tensor], Tensor]]


def _mean_hw(state: Tensor) -> Tensor:
    return state.mean(dim=(2, 3))


def layer_steps(backbone: Backbone) -> LayerSteps:
    """:class:`LayerSteps` of a backbone: MLP and CNN blocks; timm EfficientNet-style (``conv_stem``/``bn1``/
    ``blocks``, ``extra_blocks=True``) and ViT-style (``patch_embed``/``blocks``) models with every layer taken
    (``indices=None``), pre-logits included. The steps give the same hidden states as ``backbone(x)`` (tested).

    Raises:
        ValueError: a timm model or layer selection whose layer-by-layer execution is not implemented.
    """
    if isinstance(backbone, MLPBackbone):
        return LayerSteps(lambda x: x.flatten(1), list(backbone.blocks), [nn.Identity()] * len(backbone.blocks))
    if isinstance(backbone, CNNBackbone):
        return LayerSteps(nn.Identity(), list(backbone.blocks), [_mean_hw] * len(backbone.blocks))
    if isinstance(backbone, TimmBackbone) and backbone.config.indices is None:
        model, pre_logits = backbone.model, backbone.config.pre_logits
        tail: tuple[list, list] = ([], [])
        if pre_logits:
            tail = ([lambda s: model.bn2(model.conv_head(s))] if hasattr(model, "conv_head") else [nn.Identity()],
                    [backbone.head_input])  # fmt: skip
        if hasattr(model, "conv_stem") and backbone.config.intermediates_kwargs.get("extra_blocks"):
            stem = lambda x: model.bn1(model.conv_stem(x))  # noqa: E731
            return LayerSteps(nn.Identity(), [stem, *model.blocks, *tail[0]], [_mean_hw] * (len(model.blocks) + 1) + tail[1])  # fmt: skip
        if hasattr(model, "patch_embed") and hasattr(model, "_pos_embed") and not (pre_logits and tail[0] == []):
            prefix = model.num_prefix_tokens
            read = (lambda s: s[:, 0]) if backbone.pool == "cls" else (lambda s: s[:, prefix:].mean(dim=1))
            prelude = lambda x: model.norm_pre(model.patch_drop(model._pos_embed(model.patch_embed(x))))  # noqa: E731
            return LayerSteps(prelude, [*model.blocks, *tail[0]], [read] * len(model.blocks) + tail[1])
    raise ValueError(
        f"layer-by-layer execution is implemented for the mlp and cnn backbones and for timm EfficientNet "
        f"(extra_blocks) and ViT models with every layer taken; not for {backbone.config.model or backbone.config.name!r} "
        f"with indices={backbone.config.indices!r}"
    )


class _Scaled(nn.Module):
    def __init__(self, head: MixHead) -> None:
        super().__init__()
        self.head = head

    def forward(self, z: Tensor) -> Tensor:
        return self.head.scale() * z


class ExitHeads(nn.Module):
    """One exit classifier per layer, ``heads[k]: (B, d_k) -> (B, C)`` logits; with ``adapted`` its input is the
    head's adapted layer ``head.adapt(k, h_k)`` ``(B, d*)`` instead, which the run then reuses for the head.

    * :meth:`own`: LAYA/ScalarMix's readouts, the head's classifier on the adapted layer ``W (gamma z_k) + b``,
      ``z_k = g_k(h_k)`` (the modules are shared with the head, not copied; ``adapted=True``);
    * :meth:`from_probes`: linear probes (Concat/LastLayer readouts,
      :class:`~laya.analysis.depth.readouts.LayerProbes`);
    * :meth:`fit`: *trained exits*, classifiers trained for exiting on cached hidden states of the frozen trained
      model, the head fixed (the Shallow-Deep Networks comparison).
    """

    def __init__(self, heads: Sequence[nn.Module], kind: str, adapted: bool = False) -> None:
        super().__init__()
        self.heads = nn.ModuleList(heads)
        self.kind = kind
        self.adapted = adapted

    @classmethod
    def own(cls, head: LayerHead) -> ExitHeads:
        if not isinstance(head, MixHead):
            raise ValueError(f"{type(head).__name__} has no per-layer classifier of its own; use probes or trained exits")
        return cls([nn.Sequential(_Scaled(head), head.classifier) for _ in head.adapters], "readout", adapted=True)

    @classmethod
    def from_probes(cls, probes: LayerProbes) -> ExitHeads:
        heads = []
        for weight, bias in zip(probes.weights, probes.biases):
            linear = nn.Linear(weight.shape[1], weight.shape[0])
            with torch.no_grad():
                linear.weight.copy_(weight.float())
                linear.bias.copy_(bias.float())
            heads.append(linear)
        return cls(heads, "probe")

    @classmethod
    def fit(
        cls,
        hidden: Sequence[Tensor],
        labels: Tensor,
        num_classes: int,
        kind: Literal["linear", "mlp"] = "mlp",
        width: int = 128,
        epochs: int = 30,
        batch_size: int = 256,
        lr: float = 1e-3,
        seed: int = 0,
    ) -> ExitHeads:
        """Train one exit per layer on ``hidden`` (L tensors ``(N, d_k)``, the frozen model's cached features):
        ``linear`` (multinomial logistic regression, L-BFGS) or ``mlp`` (Linear -> GELU -> Linear of ``width``,
        Adam, cross-entropy; inputs standardised with the training mean and std folded into the first layer)."""
        if kind == "linear":
            return cls.from_probes(LayerProbes.fit(hidden, labels, num_classes)).relabel("trained linear")
        if kind != "mlp":
            raise ValueError(f"trained exit kind must be 'linear' or 'mlp', got {kind!r}")
        generator = torch.Generator().manual_seed(seed)
        heads = []
        y = labels.cpu()
        for h in hidden:
            x = h.detach().float().cpu()
            mean, std = x.mean(0), x.std(0).clamp(min=1e-6)
            torch.manual_seed(seed)
            net = nn.Sequential(nn.Linear(x.shape[1], width), nn.GELU(), nn.Linear(width, num_classes))
            optimizer = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=1e-4)
            xs = (x - mean) / std
            with torch.enable_grad():
                for _ in range(epochs):
                    for rows in torch.randperm(len(xs), generator=generator).split(batch_size):
                        optimizer.zero_grad()
                        nn.functional.cross_entropy(net(xs[rows]), y[rows]).backward()
                        optimizer.step()
            with torch.no_grad():  # fold the standardisation into the first layer
                first = net[0]
                first.bias.sub_(first.weight @ (mean / std))
                first.weight.div_(std)
            heads.append(net.eval())
        return cls(heads, "trained mlp")

    def relabel(self, kind: str) -> ExitHeads:
        self.kind = kind
        return self

    def forward(self, layer: int, h: Tensor) -> Tensor:
        """Layer ``layer``'s exit logits ``(B, C)`` from ``h_k`` or, if ``adapted``, from ``head.adapt(k, h_k)``."""
        return self.heads[layer](h)


Policy = Callable[[int, Tensor], Tensor]  # (layer k, exit logits (B, C)) -> (B,) bool: exit here


def confidence_policy(threshold: float) -> Policy:
    """Exit where the exit classifier's max softmax probability ``>= threshold`` (> 1: never exit)."""
    return lambda layer, logits: torch.softmax(logits, dim=-1).amax(-1) >= threshold


def alpha_profile_policy(profile: Tensor, level: float) -> Policy:
    """LAYA's α as the exit policy: exit at layer ``k`` where the exit predicts class ``c`` and the head's mean α
    for class ``c`` (``profile (C, L)``, :func:`laya.analysis.depth.detection.class_alpha_profile`, fitted on the
    training split) puts ``>= level`` of its weight on layers ``1..k``. The per-input α itself cannot decide an exit: the
    scorer ``s(x) = MLP([psi(z_1); ...; psi(z_L)])`` needs every layer, so only a class-level α is known mid-network."""
    cumulative = profile.double().cumsum(dim=1)

    def policy(layer: int, logits: Tensor) -> Tensor:
        return cumulative.to(logits.device)[logits.argmax(-1), layer] >= level

    return policy


@torch.inference_mode()
def early_exit(model: LayerwiseClassifier, exits: ExitHeads, policy: Policy, x: Tensor,
               steps: LayerSteps | None = None) -> tuple[Tensor, Tensor]:  # fmt: skip
    """One early-exit pass over a preprocessed batch ``x``: ``logits (B, C)`` (the exit's, or the head's) and
    0-based ``exit layer (B,)`` (``L``: reached the head, the model's own logits).

    Layer ``k < L - 1``: its exit classifier runs on every input still in the batch; those ``policy`` lets go
    leave with the exit's logits, the others go on. At the last layer no exit classifier runs: the head does (an
    input that exits there saves nothing). Every layer's head input ``head.adapt(k, h_k)`` (LAYA/ScalarMix:
    ``z_k``) is computed once per input that reaches it: when the exits read it (``exits.adapted``) as it goes
    and the head reuses it, otherwise for the inputs that reach the head."""
    steps, head = steps or layer_steps(model.backbone), model.head
    L = len(steps.advance)
    out: Tensor | None = None
    layers = torch.full((len(x),), L, dtype=torch.long, device=x.device)
    alive = torch.arange(len(x), device=x.device)
    state, kept = steps.prelude(x), []  # kept[k]: (alive, d*) z_k if exits.adapted, else (alive, d_k) h_k
    for k in range(L):
        state = steps.advance[k](state)
        h = steps.read[k](state)
        kept.append(head.adapt(k, h) if exits.adapted else h)
        if k == L - 1:
            break
        logits = exits(k, kept[-1])
        if out is None:
            out = logits.new_empty(len(x), logits.shape[-1])
        go = policy(k, logits)
        if go.any():
            out[alive[go]] = logits[go]
            layers[alive[go]] = k
            stay = ~go
            alive, state, kept = alive[stay], state[stay], [a[stay] for a in kept]
            if len(alive) == 0:
                return out, layers
    adapted = kept if exits.adapted else [head.adapt(i, h) for i, h in enumerate(kept)]
    logits = head.decode(head.encode_adapted(adapted), None, "zero").logits  # what model(x) runs, z_k reused
    if out is None:  # a one-layer backbone: no exit ran
        return logits, layers
    out[alive] = logits.to(out.dtype)
    return out, layers


@torch.inference_mode()
def plain(model: LayerwiseClassifier, x: Tensor) -> Tensor:
    """Plain inference, the baseline: ``model(x)`` predictions ``(B,)``."""
    return model(x).logits.argmax(-1)


def batched(run: Callable[[Tensor], Any], x: Tensor, batch_size: int) -> list[Any]:
    """``run`` on ``x`` in batches of ``batch_size``: one result per batch."""
    return [run(x[i : i + batch_size]) for i in range(0, len(x), batch_size)]


def count_macs(run: Callable[[], Any]) -> float:
    """Multiply-accumulates of ``run()`` counted by ``torch.utils.flop_counter`` (matmuls and convolutions;
    FLOPs / 2). Elementwise work (norms, activations, softmax) is not counted."""
    with FlopCounterMode(display=False) as counter:
        run()
    return counter.get_total_flops() / 2


def fastest_pair(
    first: Callable[[], Any], second: Callable[[], Any], repeats: int = 3, min_seconds: float = 0.0
) -> tuple[float, float]:
    """Seconds per call of ``first()`` and ``second()``, each the fastest of ``repeats`` timings, timed alternately
    in one process after one warm-up each (so load on a shared machine hits both alike). A timing makes ``n``
    calls, ``n`` (the same for both) chosen from the warm-ups so that the faster one's timing lasts at least
    ``min_seconds`` (as ``timeit``'s autorange): a few-millisecond run timed once is mostly scheduler noise."""
    if repeats < 1:
        raise ValueError(f"need repeats >= 1, got {repeats}")

    def timed(run: Callable[[], Any], n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            run()
        if torch.cuda.is_available():  # GPU work is asynchronous: wait for it
            torch.cuda.synchronize()
        return (time.perf_counter() - start) / n

    warm = min(timed(first, 1), timed(second, 1))
    n = max(1, math.ceil(min_seconds / warm)) if warm > 0 else 1
    best = [float("inf"), float("inf")]
    for _ in range(repeats):
        for i, run in enumerate((first, second)):
            best[i] = min(best[i], timed(run, n))
    return best[0], best[1]


@dataclass
class ExitRunOptions:
    """Batch sizes timed, how many inputs each timing covers (batch 1 loops in Python per input), repeats, and the
    shortest timing (:func:`fastest_pair` repeats a short run until it lasts this long)."""

    batch_sizes: tuple[int, ...] = (1, 64, 1024)
    timing_inputs: dict[int, int] = field(default_factory=lambda: {1: 200, 64: 1024, 1024: 2048})
    repeats: int = 3
    min_seconds: float = 0.2
    resamples: int = 1000
    seed: int = 0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.min_seconds) and self.min_seconds >= 0):  # before any run is timed
            raise ValueError(f"min_seconds must be a finite number of seconds >= 0, got {self.min_seconds}")


def exit_runs(
    model: LayerwiseClassifier,
    exits: ExitHeads,
    policies: dict[str, tuple[float, Policy]],
    x: Tensor,
    labels: Tensor,
    options: ExitRunOptions | None = None,
) -> tuple[pd.DataFrame, dict[str, Tensor]]:
    """Measured accuracy-vs-cost points, one per policy, each from real early-exit runs over ``x`` (preprocessed,
    ``(N, ...)``) against plain inference of the same inputs.

    Per policy (``name -> (parameter, policy)``): accuracy of the run's predictions (95 % bootstrap CI over inputs),
    share exited, mean layers run, MACs per input (counted in the run, exit classifiers included) and MACs saved,
    and per batch size ``b``: plain and early-exit milliseconds per input (:func:`fastest_pair`) and
    ``saved_b<b> = 1 - exit / plain`` (negative: slower). A ``"full model"`` row is plain inference.
    Returns the table and each run's per-input correctness ``(N,)`` (for paired comparisons).
    """
    options = options or ExitRunOptions()
    steps = layer_steps(model.backbone)
    L = len(steps.advance)
    labels = labels.to(x.device)
    big = max(options.batch_sizes)
    plain_macs = count_macs(lambda: batched(lambda b: plain(model, b), x, big)) / len(x)
    correct = {"full model": (torch.cat(batched(lambda b: plain(model, b), x, big)) == labels).double().cpu()}
    rows = [{"policy": "full model", "parameter": None, "exits": exits.kind, "exited": 0.0, "mean_layers": float(L),
             "macs": plain_macs, "macs_saved": 0.0}]  # fmt: skip
    for name, (parameter, policy) in policies.items():
        def run(b: Tensor, policy: Policy = policy) -> tuple[Tensor, Tensor]:
            return early_exit(model, exits, policy, b, steps)

        out = batched(run, x, big)
        predictions, layers = torch.cat([p.argmax(-1) for p, _ in out]), torch.cat([k for _, k in out])
        macs = count_macs(lambda: batched(run, x, big)) / len(x)
        correct[name] = (predictions == labels).double().cpu()
        rows.append({"policy": name, "parameter": parameter, "exits": exits.kind,
                     "exited": float((layers < L).double().mean()), "mean_layers": float((layers.clamp(max=L - 1) + 1).double().mean()),
                     "macs": macs, "macs_saved": 1 - macs / plain_macs})  # fmt: skip
    for b in options.batch_sizes:
        xb = x[: options.timing_inputs.get(b, len(x))]
        plain_ms = []
        for row in rows[1:]:
            policy = policies[row["policy"]][1]
            p, e = fastest_pair(lambda: batched(lambda c: plain(model, c), xb, b),
                                lambda policy=policy: batched(lambda c: early_exit(model, exits, policy, c, steps), xb, b),
                                options.repeats, options.min_seconds)  # fmt: skip
            plain_ms.append(p * 1e3 / len(xb))
            row.update({f"plain_ms_b{b}": plain_ms[-1], f"exit_ms_b{b}": e * 1e3 / len(xb), f"saved_b{b}": 1 - e / p})
        fastest = min(plain_ms) if plain_ms else None
        rows[0].update({f"plain_ms_b{b}": fastest, f"exit_ms_b{b}": fastest, f"saved_b{b}": 0.0})
    for row in rows:
        ci = bootstrap_ci(correct[row["policy"]], resamples=options.resamples, seed=options.seed)
        row.update({"accuracy": ci.estimate, "accuracy_low": ci.low, "accuracy_high": ci.high})
    return pd.DataFrame(rows), correct


def compare_policies(
    table: pd.DataFrame, correct: dict[str, Tensor], challengers: Sequence[str], resamples: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """Each challenger policy (e.g. α-profile exits) against the confidence-threshold run with the closest MACs
    per input: the accuracy difference with a paired bootstrap over inputs (95 % CI; covering 0 = tie) and both
    runs' MACs. ``table``/``correct``: from :func:`exit_runs` (confidence rows named ``confidence ...``)."""
    confidence = table[table["policy"].str.startswith("confidence")]
    rows = []
    for name in challengers:
        mine = table.set_index("policy").loc[name]
        rival = confidence.loc[(confidence["macs"] - mine["macs"]).abs().idxmin()]
        test = paired_bootstrap(correct[name], correct[rival["policy"]], resamples=resamples, seed=seed)
        rows.append({"policy": name, "versus": rival["policy"], "macs": mine["macs"], "versus_macs": rival["macs"],
                     "accuracy_difference": test.difference.estimate, "difference_low": test.difference.low,
                     "difference_high": test.difference.high, "p_value": test.p_value, "test": test.test,
                     "verdict": verdict(test, name, rival["policy"])})  # fmt: skip
    return pd.DataFrame(rows)


__all__ = ["THRESHOLDS", "ExitHeads", "ExitRunOptions", "LayerSteps", "Policy", "alpha_profile_policy",
           "batched", "compare_policies", "compute_saved", "confidence_policy", "count_macs", "early_exit", "exit_curve",
           "exit_layers", "exit_predictions", "exit_runs", "fastest_pair", "layer_costs", "layer_steps", "plain",
           "timed_batch"]  # fmt: skip
