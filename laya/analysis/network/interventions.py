"""Interventions on the network's units (or stages), every unit at once in one batched pass.

For an input ``x`` with prediction ``ŷ`` and units ``u = 1..U`` (:mod:`laya.analysis.network.units`), each unit is
intervened on inside the network and every later module runs on from it. A **residual** unit (one that keeps its
input: :attr:`Unit.residual`), ``h_u = σ_u + f_u``, is acted on through its branch ``f_u = h_u - σ_u``, its
*stream* ``σ_u`` kept, so the rest of the network still computes from ``x``: ``σ_u = x_u`` where the shortcut is the
identity (``h_u = x_u + f_u(x_u)``), ``σ_u = s_u(x_u)`` where it is a module (a ResNet unit's ``downsample``:
``h_u = s_u(x_u) + f_u(x_u)``), and ``relu(s_u(x_u))`` where a ReLU follows the addition
(``h_u = relu(s_u(x_u) + g(x_u))``: the unit's output with its branch removed). A unit with no shortcut at all (a
stem, a strided inverted residual, a transition) is not residual: it is acted on through its whole output, after
which nothing sees ``x`` but what the head reads from earlier layers:

* ``skip`` (residual units, exact): ``f_u <- 0``, i.e. ``h_u <- σ_u``. A unit that is not residual has no branch
  to remove: it gets the ``fallback`` (``resample`` by default) and its :attr:`UnitProfile.methods` entry says so.
* ``resample``: ``f_u <- f_u(r_k)`` (``h_u <- h_u(r_k)`` where not residual) for each of ``K`` reference inputs ``r_k``
  (training split, class-balanced, seeded: :func:`reference_inputs`), the ``K`` results averaged:
  ``drop_u(x) = p_ŷ(x) - 1/K Σ_k p_ŷ(x | f_u <- f_u(r_k))``; the standard of the patching literature (it stays on the
  data distribution and keeps what the rest of the network computes from ``x``). Replacing a residual unit's whole
  output would replace the stream itself: everything after it would see ``r_k`` alone.
* ``mean``: ``f_u <- 1/R Σ_r f_u(r)`` (``h_u <-`` the mean output where not residual) over ``R`` references. Where the
  unit is not residual, everything after it sees a constant: ``drop_u(x) = p_ŷ(x) - c(u, ŷ)``, the same for every
  input of one predicted class (:attr:`UnitProfile.keeps_input` is False there).

For a post-activation unit, ``h_u = relu(x_u + g(x_u))`` or ``relu(s_u(x_u) + g(x_u))``, the branch is
``h_u - σ_u`` as measured (``x_u >= 0``; ``σ_u = relu(s_u(x_u))``), not ``g`` itself, and
``target="output"`` replaces every unit's whole output instead (:func:`laya.analysis.block_ablation.block_ablation`).

``branch`` chooses one of a transformer block's two additions to its stream (:attr:`Unit.branches`: attention first,
MLP second), ``h_u = y + m(y)`` with ``y = x_u + a(x_u)``. The branch module's output is replaced and the rest of the
block runs on from it: skip of attention ``a <- 0``, i.e. ``h_u <- x_u + m(x_u)`` (the MLP recomputed on the stream
without the attention output); skip of MLP ``m <- 0``, i.e. ``h_u <- x_u + a(x_u)``; resample ``a <- a(r_k)`` (then
``h_u = y' + m(y')``, ``y' = x_u + a(r_k)``); mean ``a <- 1/R Σ_r a(r)``; the same for ``m``. The addition is the
module's output through maps that keep 0 (LayerScale, dropout, drop path), as in timm's and transformers' ViTs. A unit
without that branch (a CNN unit, one that is not residual, a stage without a module, a branch module that does not
run exactly once as a module in a pass) gets the whole-block intervention instead, and its
:attr:`UnitProfile.methods` entry says so (``resample of the whole block``). Where a branch is chosen or some unit
has both, every entry names its part (``skip of attention``, ``skip of the whole block``).

One pass of ``x`` (traced: which units are residual) records every unit's input and output, and one of the references
(for resample, mean, and skip's fallback) theirs; then ONE pass of ``x`` in which row ``(b, u, k)``, input ``b`` with
unit ``u``'s output replaced by its ``k``-th value (``K_u = K`` for resample, 1 for skip and mean), joins the batch
where it parts from ``x``: at the unit's output, or at its input where a branch inside it is replaced. No row reruns the
modules before its unit, so the pass costs about ``1 + Σ_u K_u·(share of the network after u)`` forwards rather than
``Σ_u K_u``; a layer read before a unit takes ``x``'s value for that unit's rows, and so does a tensor kept from before
a unit and combined with one after it (a long skip, a DenseNet's concatenated features:
:class:`~laya.analysis.network.grown_rows.Carried`, tried where the plain grown pass fails, and kept for the backbone
that needed it). A network that does not carry the grown batch otherwise (it fixes its batch size, or adds in place to a
tensor from before a unit) raises a size mismatch there, and every row then runs the whole network. Each hook acts only
for the calling thread (:class:`~laya.model.hooks.Hooks`): the shared model is never changed. A unit without a module (a
pre-logits layer at stage granularity) is replaced in the hidden state handed to the head. Heads in float64.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import torch
from torch import Tensor

from laya.analysis.head.ablation import float64_head
from laya.analysis.network.grown_rows import CARRIES, rows_pass
from laya.analysis.network.units import Streams, Unit, network_root
from laya.analysis.patching import Block, on_input
from laya.analysis.sample import sample_indices
from laya.data.datasets import Images
from laya.model.classifier import LayerwiseClassifier
from laya.model.hooks import Hooks, layer_tensor, pass_rows

Method = Literal["resample", "skip", "mean"]
SKIP, RESAMPLE, MEAN = "skip", "resample", "mean-ablation"
NAMES: dict[str, str] = {"skip": SKIP, "resample": RESAMPLE, "mean": MEAN}
Target = Literal["branch", "output"]
Branch = Literal["block", "attention", "mlp"]
BRANCHES: dict[str, str] = {"block": "the whole block", "attention": "attention", "mlp": "MLP"}  # in methods' labels
DEFAULT: Method = "resample"  # keeps the input
RESAMPLES = 8  # K
REFERENCES = 256  # R, for mean-ablation


@dataclass
class UnitProfile:
    """Per input ``b`` and unit ``u``: ``drops`` ``(B, U)`` ``p_ŷ(x) - mean_k p_ŷ(x | h_u <- ·)``;
    ``ablated_predictions`` ``(B, U)`` the class of the (K-averaged) intervened probabilities; ``prediction`` and
    ``probability`` ``(B,)`` unablated. ``units``, ``stages``: names as the network gives them; ``methods``: the
    intervention applied to each unit; ``residual``: measured in this pass; ``references``: ``K`` (resample) or
    ``R`` (mean) inputs, 0 for skip alone. ``base_logits`` ``(B, C)`` and ``logits`` ``(B, U, C)`` float64: the
    unablated and the intervened logits (the mean over the ``K`` rows of a resampled unit; its one row where
    ``paired``: activation patching)."""

    drops: Tensor
    ablated_predictions: Tensor
    prediction: Tensor
    probability: Tensor
    units: tuple[str, ...]
    stages: tuple[str, ...]
    methods: tuple[str, ...]
    branches: tuple[str, ...]
    residual: tuple[bool, ...]
    references: int
    base_logits: Tensor
    logits: Tensor

    @property
    def keeps_input(self) -> tuple[bool, ...]:
        """Per unit, whether the network after it still computes from ``x`` (the unit is residual); where not, the
        drop is ``p_ŷ(x)`` minus a number set by the unit, ``ŷ`` and the references alone."""
        return self.residual

    @property
    def flips(self) -> Tensor:
        """``(B, U)`` True where the intervention changes the predicted class."""
        return self.ablated_predictions != self.prediction.unsqueeze(1)


def reference_inputs(data: Images, size: int = RESAMPLES, seed: int = 0) -> Tensor:
    """``uint8 (size, C, H, W)`` reference inputs from ``data`` (the training split): a seeded, class-balanced
    sample (:func:`~laya.analysis.sample.sample_indices`), to preprocess as the input."""
    if size < 1:
        raise ValueError(f"the number of reference inputs must be at least 1, got {size}")
    index = sample_indices(data.labels, size, seed)
    return torch.stack([data.image(int(i)) for i in index])


def method_label(method: Method, part: Branch | None = None) -> str:
    """How :attr:`UnitProfile.methods` names ``method`` on ``part`` (None: no part named): ``resample of attention``."""
    return NAMES[method] + ("" if part is None else f" of {BRANCHES[part]}")


def branch_of(unit: Unit, branch: Branch) -> str | None:
    """The module name of ``unit``'s ``branch``: of a unit's two additions to its stream (:attr:`Unit.branches`),
    attention is the first and MLP the second; None for ``"block"`` and for a unit without two."""
    if branch == "block" or len(unit.branches) != 2:
        return None
    return unit.branches[0 if branch == "attention" else 1]


def branched(units: Sequence[Unit]) -> bool:
    """Whether some unit of ``units`` has an attention and an MLP branch to choose (a transformer block)."""
    return any(len(u.branches) == 2 for u in units)


def _record(
    hooks: Hooks, blocks: Sequence[Block | None], outputs: dict[int, list[Tensor]], inputs: dict[int, Tensor]
) -> None:
    """Into ``hooks``: each block's outputs (every run) and its last input (where the block knows it)."""
    for i, block in enumerate(blocks):
        if block is None:
            continue
        hooks.after(block.module, lambda m, a, out, i=i: outputs.setdefault(i, []).append(layer_tensor(out)))
        if block.entry is not None:
            on_input(hooks, block, lambda x, i=i: inputs.__setitem__(i, x.clone()))


@dataclass
class _Traced:
    """One recorded pass: the backbone's ``hidden`` states; per unit its module's ``outputs`` (every run), its
    ``inputs`` (where known), its ``branch`` module (``parts``, None without one) and that module's outputs
    (``part_outputs``, every run), and whether it is ``residual``; ``streams`` per residual unit its output without
    its branch, ``σ_u``: its input, or its shortcut's output through the ReLUs after the addition."""

    hidden: list[Tensor]
    outputs: dict[int, list[Tensor]]
    inputs: dict[int, Tensor]
    parts: list[Block | None]
    part_outputs: dict[int, list[Tensor]]
    residual: list[bool]
    streams: dict[int, Tensor]

    def part(self, u: int) -> Tensor | None:
        """Unit ``u``'s branch module output where that module ran once (it can be chosen), else None."""
        runs = self.part_outputs.get(u, ())
        return runs[0] if len(runs) == 1 else None


def _traced(model: LayerwiseClassifier, units: Sequence[Unit], branch: Branch, x: Tensor) -> _Traced:
    """``model.backbone(x)`` once, recording every unit of ``units`` and its ``branch`` module, traced
    (:class:`~laya.analysis.network.units.Streams`: which units are residual)."""
    root = network_root(model.backbone)
    parts = [None if (n := branch_of(u, branch)) is None else Block(root.get_submodule(n), None) for u in units]
    blocks = [u.block for u in units]
    traced = _Traced([], {}, {}, parts, {}, [], {})
    with Hooks() as hooks:
        _record(hooks, blocks, traced.outputs, traced.inputs)
        _record(hooks, parts, traced.part_outputs, {})
        with Streams(blocks) as streams:
            traced.hidden = model.backbone(x)
    traced.residual = [bool(u.block is not None and streams.residual[i]) for i, u in enumerate(units)]
    for i, kept in enumerate(streams.kept):
        if traced.residual[i]:
            traced.streams[i] = traced.inputs[i] if kept is None else kept.relu() if streams.rectified[i] else kept
    return traced


Kind = Literal["part", "branch", "output"]


@dataclass(frozen=True)
class References:
    """The reference inputs as the interventions read them, recorded once (:func:`record_references`) and reused
    for any number of inputs: per unit one tensor ``values[u]`` ``(R, ...)`` of ``kinds[u]``: ``"part"`` the output
    of its ``branch`` module (where it has one that runs once), ``"branch"`` its branch ``h_u - x_u`` (a residual
    unit, ``target="branch"``), else ``"output"`` its whole output (a unit without a module: its layer). ``mean``:
    each holds its mean over the references ``(1, ...)`` alone (mean-ablation only). ``units``, ``branch``,
    ``target``: what they were recorded for; ``count``: ``R``."""

    count: int
    units: tuple[str, ...]
    branch: Branch
    target: Target
    mean: bool
    kinds: tuple[Kind, ...]
    values: tuple[Tensor, ...]


def _unit_groups(counts: Sequence[int], inputs: int, rows: int) -> list[list[int]]:
    """Consecutive units whose rows (``inputs`` each, ``counts[u]`` per input of unit ``u``, beside the inputs' own)
    fit ``rows`` together; one unit a group at least."""
    groups: list[list[int]] = [[]]
    for u, count in enumerate(counts):
        if groups[-1] and inputs * (1 + sum(counts[v] for v in groups[-1]) + count) > rows:
            groups.append([])
        groups[-1].append(u)
    return groups


def _some(reference: Tensor | References, units: Sequence[int]) -> Tensor | References:
    """The references of ``units`` alone (recorded ones), or the reference inputs as they are."""
    if not isinstance(reference, References):
        return reference
    return replace(reference, units=tuple(reference.units[u] for u in units),
                   kinds=tuple(reference.kinds[u] for u in units), values=tuple(reference.values[u] for u in units))


def _joined(profiles: Sequence[UnitProfile]) -> UnitProfile:
    """The profiles of consecutive groups of units on the same inputs as one (the unablated fields: the first's)."""
    per_unit = {f: torch.cat([getattr(p, f) for p in profiles], 1) for f in ("drops", "ablated_predictions", "logits")}
    for f in ("units", "stages", "methods", "branches", "residual"):
        per_unit[f] = sum((getattr(p, f) for p in profiles), ())
    return replace(profiles[0], **per_unit)


@torch.inference_mode()
def record_references(
    model: LayerwiseClassifier, units: Sequence[Unit], reference: Tensor, branch: Branch = "block",
    mean: bool = False, target: Target = "branch",
) -> References:  # fmt: skip
    """One pass of ``reference`` ``(R, C, H, W)`` (preprocessed, traced: which units are residual) recording what
    :func:`intervene` replaces each unit of ``units`` by, for every input it is then given, one tensor per unit;
    ``mean``: keep only the means (``R`` may then be large at little memory). Raises ``ValueError`` for no
    reference or an unknown branch."""
    if len(reference) == 0 or branch not in BRANCHES:
        raise ValueError(f"references need at least one input and a branch of {sorted(BRANCHES)}; got "
                         f"{len(reference)} inputs, branch {branch!r}")  # fmt: skip
    traced = _traced(model, units, branch, reference)
    kinds: list[Kind] = []
    values: list[Tensor] = []
    for u, unit in enumerate(units):
        if (part := traced.part(u)) is not None:
            kinds.append("part")
            values.append(part)
        elif traced.residual[u] and target == "branch":
            kinds.append("branch")
            values.append(traced.outputs[u][0] - traced.streams[u])
        else:
            kinds.append("output")
            values.append(traced.outputs[u][0] if unit.block is not None else traced.hidden[unit.layer])
    values = [v.mean(0, keepdim=True) if mean else v for v in values]
    return References(len(reference), tuple(u.name for u in units), branch, target, mean, tuple(kinds),
                      tuple(values))  # fmt: skip


@torch.inference_mode()
def intervene(
    model: LayerwiseClassifier,
    x: Tensor,
    units: Sequence[Unit],
    method: Method = DEFAULT,
    reference: Tensor | References | None = None,
    fallback: Method = "resample",
    target: Target = "branch",
    branch: Branch = "block",
    paired: bool = False,
) -> UnitProfile:
    """Every unit of ``units`` intervened on for each input of ``x`` ``(B, C, H, W)`` by ``method`` (module
    docstring). One pass of ``x`` records every unit (and, for resample and mean and where skip falls back, one pass
    of ``reference`` ``(K or R, C, H, W)``, preprocessed as ``x``); then one pass of ``x`` in which unit ``u``'s
    ``B·K_u`` rows join the batch where they part from ``x`` (:func:`_rows_pass`), about ``1 + Σ_u K_u·(share of
    the network after u)`` forwards. ``target``: ``"branch"`` replaces a residual unit's branch ``h_u - x_u`` (the
    stream kept), ``"output"`` its whole output. ``branch``: ``"attention"`` or ``"mlp"`` acts on that one branch
    of each unit that has it (:func:`branch_of`), the whole block elsewhere; ``"block"`` on the whole block.
    ``paired`` (resample): input ``b`` takes reference ``b`` alone (``R = B``, one row per unit and input), the
    activation patching of each unit from a source input into a target.

    Raises ``ValueError`` for an unknown method or branch, a skip fallback that is skip, a branch with
    ``target="output"``, a missing or misshapen reference, a pairing of other than resample or of ``R != B``, or a
    unit whose module runs more than once in a pass (no single output to replace)."""
    if method not in NAMES or fallback not in NAMES or fallback == "skip":
        raise ValueError(f"method must be one of {sorted(NAMES)} and fallback resample or mean; "
                         f"got {method!r}, {fallback!r}")  # fmt: skip
    if branch not in BRANCHES or (branch != "block" and target == "output"):
        raise ValueError(f"branch must be one of {sorted(BRANCHES)}, and 'block' where target is 'output'; got "
                         f"{branch!r} with target {target!r}")  # fmt: skip
    if reference is None:
        reference = x[:0]
    elif isinstance(reference, References):
        if reference.units != tuple(u.name for u in units) or (reference.branch, reference.target) != (branch, target):
            raise ValueError(f"the references were recorded for units {list(reference.units)[:3]}... on branch "
                             f"{reference.branch!r}, target {reference.target!r}, not for these (branch {branch!r}, "
                             f"target {target!r})")  # fmt: skip
    elif reference.shape[1:] != x.shape[1:]:
        raise ValueError(f"reference must be (R, {', '.join(map(str, x.shape[1:]))}), got {tuple(reference.shape)}")
    R = reference.count if isinstance(reference, References) else len(reference)
    B, U = len(x), len(units)
    if paired and (method != "resample" or R != B):
        raise ValueError(f"pairs need resample and one reference per input; got {method!r}, {R} references for "
                         f"{B} inputs")  # fmt: skip
    head = float64_head(model.head)
    names = [branch_of(u, branch) for u in units]
    traced = _traced(model, units, branch, x)
    ran = [len(traced.outputs.get(i, ())) for i, u in enumerate(units) if u.block is not None]
    if any(n != 1 for n in ran):
        raise ValueError(f"each unit's module must run once in a pass; counts: {ran}")
    chosen = [traced.part(u) is not None for u in range(U)]  # else: the whole block
    residual = tuple(traced.residual)
    methods = [method if method != "skip" or residual[u] or chosen[u] else fallback for u in range(U)]
    on_stream = [not chosen[u] and residual[u] and (target == "branch" or methods[u] == "skip") for u in range(U)]
    if R == 0 and any(m != "skip" for m in methods):
        raise ValueError(f"{NAMES[method]} needs reference inputs (units not residual: "
                         f"{[u.name for u, r in zip(units, residual) if not r][:5]})")  # fmt: skip
    if isinstance(reference, References) and reference.mean and "resample" in methods:
        raise ValueError("resample needs every reference's value; these references keep only their means")
    if any(m != "skip" for m in methods) and not isinstance(reference, References):
        reference = record_references(model, units, reference, branch, target=target)
    counts = [R if m == "resample" and not paired else 1 for m in methods]  # K_u rows per input for unit u
    groups = _unit_groups(counts, B, pass_rows(model.backbone, x, B * (1 + sum(counts))))
    if len(groups) > 1:  # every unit's rows at once would not fit: passes of units whose rows do
        return _joined([intervene(model, x, [units[u] for u in g], method, _some(reference, g), fallback, target,
                                  branch, paired) for g in groups])  # fmt: skip
    order = [u for u in range(U) if units[u].block is not None] + [u for u in range(U) if units[u].block is None]
    starts = dict(zip(order, (B + B * torch.tensor([0] + [counts[u] for u in order]).cumsum(0)).tolist()))
    at = [torch.arange(starts[u], starts[u] + B * counts[u], device=x.device) for u in range(U)]  # rows (b, k)
    values: list[Tensor] = []
    for u, m in enumerate(methods):
        stream = traced.streams[u].repeat_interleave(counts[u], 0) if on_stream[u] else 0
        if m == "skip":  # residual (the stream kept) or a chosen branch (its module's output zeroed)
            values.append(stream if on_stream[u] else torch.zeros_like(traced.part(u)))
            continue
        needed = "part" if chosen[u] else "branch" if on_stream[u] else "output"
        if reference.kinds[u] != needed:  # measured on other inputs: a residual unit that was not so there
            raise ValueError(f"the references hold unit {units[u].name!r}'s {reference.kinds[u]}, not its {needed}")
        ref = reference.values[u]
        ref = ref if m == "resample" else ref.mean(0, keepdim=True)  # (K_u, ...), or (B, ...) paired
        values.append(stream + (ref if paired else ref.repeat(B, *[1] * (ref.ndim - 1))))  # row (b, k) = value k
    targets = [p if c else u.block for u, p, c in zip(units, traced.parts, chosen)]
    grow = [u.block if c else None for u, c in zip(units, chosen)]  # a branch's rows join at the block's input
    layers = [u.layer for u in units]
    hidden = None
    for carry in (True,) if CARRIES.get(model.backbone) else (False, True):  # the mode's cost only where needed
        try:
            hidden = rows_pass(model, x, targets, grow, at, values, layers, grown=True, carry=carry)
        except torch.OutOfMemoryError:  # the whole rows would need more
            raise
        except RuntimeError:  # a network that does not carry the rows (_Ungrown, or a size mismatch)
            continue
        if carry:
            CARRIES[model.backbone] = True
        break
    if hidden is None:  # not even carrying its tensors: every row runs the whole network
        hidden = rows_pass(model, x, targets, grow, at, values, layers, grown=False)
    hidden = [h.double() for h in hidden]
    for u, unit in enumerate(units):
        if unit.block is None:  # no module (never residual, so a value): the head reads the replacement
            hidden[unit.layer][at[u]] = values[u].double()
    logits = head(hidden).logits  # (rows, C)
    probs = torch.softmax(logits, -1)
    base, prediction = probs[:B], probs[:B].argmax(-1)
    p = torch.stack([probs[at[u]].view(B, counts[u], -1).mean(1) for u in range(U)], 1)  # (B, U, C), K-averaged
    intervened = torch.stack([logits[at[u]].view(B, counts[u], -1).mean(1) for u in range(U)], 1)
    kept = p.gather(2, prediction.view(-1, 1, 1).expand(-1, U, 1))[..., 0]
    probability = base.gather(1, prediction.view(-1, 1))[:, 0]
    references = R if any(m != "skip" for m in methods) else 0
    named = branch != "block" or branched(units)
    labels = tuple(method_label(m, (branch if c else "block") if named else None) for m, c in zip(methods, chosen))
    return UnitProfile(probability.unsqueeze(1) - kept, p.argmax(-1), prediction, probability,
                       tuple(u.name for u in units), tuple(u.stage for u in units), labels,
                       tuple(n if c else "" for n, c in zip(names, chosen)), residual, references, logits[:B],
                       intervened)  # fmt: skip


__all__ = ["BRANCHES", "DEFAULT", "MEAN", "REFERENCES", "RESAMPLE", "RESAMPLES", "SKIP", "Branch", "Kind", "Method",
           "References", "Target", "UnitProfile", "branch_of", "branched", "intervene", "method_label",
           "record_references", "reference_inputs"]  # fmt: skip
