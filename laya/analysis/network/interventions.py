"""Interventions on the network's units (or stages), every unit at once in one batched pass.

For an input ``x`` with prediction ``ŷ`` and units ``u = 1..U`` (:mod:`laya.analysis.network.units`), each unit is
intervened on inside the network and every later module runs on from it. A **residual** unit,
``h_u = x_u + f_u(x_u)``, is acted on through its branch ``f_u = h_u - x_u`` (the stream ``x_u`` is kept, so the rest
of the network still computes from ``x``); a unit that is not residual (a downsampling ResNet unit, a stem) through
its whole output, after which nothing sees ``x`` but what the head reads from earlier layers:

* ``skip`` (residual units, exact): ``f_u <- 0``, i.e. ``h_u <- x_u``. A unit that is not residual has no branch
  to remove: it gets the ``fallback`` (``resample`` by default) and its :attr:`UnitProfile.methods` entry says so.
* ``resample``: ``f_u <- f_u(r_k)`` (``h_u <- h_u(r_k)`` where not residual) for each of ``K`` reference inputs ``r_k``
  (training split, class-balanced, seeded: :func:`reference_inputs`), the ``K`` results averaged:
  ``drop_u(x) = p_ŷ(x) - 1/K Σ_k p_ŷ(x | f_u <- f_u(r_k))``; the standard of the patching literature (it stays on the
  data distribution and keeps what the rest of the network computes from ``x``). Replacing a residual unit's whole
  output would replace the stream itself: everything after it would see ``r_k`` alone.
* ``mean``: ``f_u <- 1/R Σ_r f_u(r)`` (``h_u <-`` the mean output where not residual) over ``R`` references. Where the
  unit is not residual, everything after it sees a constant: ``drop_u(x) = p_ŷ(x) - c(u, ŷ)``, the same for every
  input of one predicted class (:attr:`UnitProfile.keeps_input` is False there).

For a post-activation unit, ``h_u = relu(x_u + g(x_u))``, the branch is ``h_u - x_u`` as measured (``x_u >= 0``), and
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

One pass of the references and ``x`` together (traced: which units are residual) records every unit's output; then
ONE pass of ``B·Σ_u K_u`` rows (``K_u = K`` for resample, 1 for skip and mean), row ``(b, u, k)`` being input ``b``
with unit ``u``'s output replaced by its ``k``-th value. Each unit's forward hook writes only its own rows, and only for the calling thread
(:func:`~laya.analysis.patching.owned`): the shared model is never changed. A unit without a module (a pre-logits
layer at stage granularity) is replaced in the hidden state handed to the head. Heads in float64.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor

from laya.analysis.ablation import float64_head
from laya.analysis.network.units import Unit, _root, _Streams
from laya.analysis.patching import Block, _hooks, _tensor, _with_first, on_input, owned
from laya.analysis.sample import sample_indices
from laya.data.datasets import Images
from laya.model.classifier import LayerwiseClassifier

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
    ``R`` (mean) inputs, 0 for skip alone."""

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


@contextlib.contextmanager
def _replaced(
    blocks: Sequence[Block | None], rows: Sequence[Tensor], values: Sequence[Tensor | None], branch: Sequence[bool]
) -> Iterator[None]:
    """Within the block, module ``blocks[u]``'s output in batch rows ``rows[u]`` is ``values[u]``
    (``(len(rows[u]), ...)``; None: zeros), or where ``branch[u]`` its own input there plus ``values[u]`` (None: plus
    nothing, a skip); other rows as they are."""
    handles = []
    for block, at, value, on_stream in zip(blocks, rows, values, branch):
        if block is None or len(at) == 0:
            continue
        given: list[Tensor] = []
        if on_stream:
            handles.append(on_input(block, lambda x, at=at, given=given: given.append(x[at].clone())))

        def hook(m: Any, a: Any, out: Any, at: Tensor = at, value: Tensor | None = value, given=given) -> Any:
            new = _tensor(out).clone()  # a unit may hand its input on: write a copy
            stream = given.pop() if given else 0
            new[at] = stream if value is None else stream + value.to(new.dtype)
            return _with_first(out, new)

        handles.append(block.module.register_forward_hook(owned(hook), prepend=True))
    with _hooks(*handles):
        yield


def _recorded(blocks: Sequence[Block | None], outputs: dict[int, list[Tensor]], inputs: dict[int, Tensor]) -> Any:
    """Within the block, each block's outputs (every run) and its last input (where the block knows it)."""
    handles = []
    for i, block in enumerate(blocks):
        if block is None:
            continue
        handles.append(block.module.register_forward_hook(
            owned(lambda m, a, out, i=i: outputs.setdefault(i, []).append(_tensor(out)))))  # fmt: skip
        if block.entry is not None:
            handles.append(on_input(block, lambda x, i=i: inputs.__setitem__(i, x.clone())))
    return _hooks(*handles)


@torch.inference_mode()
def intervene(
    model: LayerwiseClassifier,
    x: Tensor,
    units: Sequence[Unit],
    method: Method = DEFAULT,
    reference: Tensor | None = None,
    fallback: Method = "resample",
    target: Target = "branch",
    branch: Branch = "block",
) -> UnitProfile:
    """Every unit of ``units`` intervened on for each input of ``x`` ``(B, C, H, W)`` by ``method`` (module
    docstring), in one pass of ``B·Σ_u K_u`` rows after one pass of ``reference`` ``(K or R, C, H, W)`` (preprocessed as
    ``x``; needed for resample and mean, and for skip where a unit falls back) and ``x`` together. ``target``:
    ``"branch"`` replaces a residual unit's branch ``h_u - x_u`` (the stream kept), ``"output"`` its whole output.
    ``branch``: ``"attention"`` or ``"mlp"`` acts on that one branch of each unit that has it (:func:`branch_of`),
    the whole block elsewhere; ``"block"`` on the whole block.

    Raises ``ValueError`` for an unknown method or branch, a skip fallback that is skip, a branch with
    ``target="output"``, a missing or misshapen reference, or a unit whose module runs more than once in a pass (no
    single output to replace)."""
    if method not in NAMES or fallback not in NAMES or fallback == "skip":
        raise ValueError(f"method must be one of {sorted(NAMES)} and fallback resample or mean; "
                         f"got {method!r}, {fallback!r}")  # fmt: skip
    if branch not in BRANCHES or (branch != "block" and target == "output"):
        raise ValueError(f"branch must be one of {sorted(BRANCHES)}, and 'block' where target is 'output'; got "
                         f"{branch!r} with target {target!r}")  # fmt: skip
    if reference is None:
        reference = x[:0]
    elif reference.shape[1:] != x.shape[1:]:
        raise ValueError(f"reference must be (R, {', '.join(map(str, x.shape[1:]))}), got {tuple(reference.shape)}")
    R, B, U = len(reference), len(x), len(units)
    head = float64_head(model.head)
    root = _root(model.backbone)
    names = [branch_of(u, branch) for u in units]
    parts = [None if n is None else Block(root.get_submodule(n), None) for n in names]  # the branch modules
    store: dict[int, list[Tensor]] = {}
    given: dict[int, Tensor] = {}
    of_parts: dict[int, list[Tensor]] = {}
    with _recorded([u.block for u in units], store, given), _recorded(parts, of_parts, {}), \
            _Streams([u.block for u in units]) as streams:  # fmt: skip
        hidden = model.backbone(torch.cat([reference, x]))
    ran = [len(store.get(i, ())) for i, u in enumerate(units) if u.block is not None]
    if any(n != 1 for n in ran):
        raise ValueError(f"each unit's module must run once in a pass; counts: {ran}")
    chosen = [p is not None and len(of_parts.get(u, ())) == 1 for u, p in enumerate(parts)]  # else: the whole block
    outputs = [of_parts[i][0] if chosen[i] else store[i][0] if u.block is not None else hidden[u.layer]
               for i, u in enumerate(units)]  # fmt: skip
    base = torch.softmax(head([h[R:].double() for h in hidden]).logits, -1)
    prediction = base.argmax(-1)
    residual = tuple(bool(u.block is not None and streams.residual[i]) for i, u in enumerate(units))
    methods = [method if method != "skip" or residual[u] or chosen[u] else fallback for u in range(U)]
    on_stream = [not chosen[u] and residual[u] and (target == "branch" or methods[u] == "skip") for u in range(U)]
    if R == 0 and any(m != "skip" for m in methods):
        raise ValueError(f"{NAMES[method]} needs reference inputs (units not residual: "
                         f"{[u.name for u, r in zip(units, residual) if not r][:5]})")  # fmt: skip
    counts = [R if m == "resample" else 1 for m in methods]  # K_u rows per input for unit u
    S = sum(counts)
    offsets = torch.tensor([0, *counts[:-1]], device=x.device).cumsum(0)
    values: list[Tensor | None] = []
    at: list[Tensor] = []
    for u, m in enumerate(methods):
        at.append((torch.arange(B, device=x.device).view(B, 1) * S + offsets[u] + torch.arange(counts[u],
                   device=x.device)).flatten())  # rows (b, k) of unit u  # fmt: skip
        ref = outputs[u][:R] - given[u][:R] if on_stream[u] else outputs[u][:R]  # the branch: h_u - x_u
        value = None if m == "skip" else ref if m == "resample" else ref.mean(0, keepdim=True)  # (K_u, ...)
        values.append(None if value is None else value.repeat(B, *[1] * (value.ndim - 1)))  # (B·K_u, ...)
    with _replaced([p if c else u.block for u, p, c in zip(units, parts, chosen)], at, values, on_stream):
        hidden = [h.double() for h in model.backbone(x.repeat_interleave(S, 0))]
    for u, unit in enumerate(units):
        if unit.block is None:  # no module (never residual, so a value): the head reads the replacement
            hidden[unit.layer][at[u]] = values[u].double()
    group = torch.cat([torch.arange(B, device=x.device).repeat_interleave(counts[u]) * U + u for u in range(U)])
    rows = torch.cat(at)
    p_rows = torch.softmax(head(hidden).logits, -1)[rows]  # (B·S, C), in the order of group
    p = torch.zeros(B * U, p_rows.shape[1], dtype=p_rows.dtype, device=x.device).index_add_(0, group, p_rows)
    p = (p / torch.tensor(counts, dtype=p.dtype, device=x.device).repeat(B).view(-1, 1)).view(B, U, -1)  # (B, U, C)
    kept = p.gather(2, prediction.view(-1, 1, 1).expand(-1, U, 1))[..., 0]
    probability = base.gather(1, prediction.view(-1, 1))[:, 0]
    references = R if any(m != "skip" for m in methods) else 0
    named = branch != "block" or branched(units)
    labels = tuple(method_label(m, (branch if c else "block") if named else None) for m, c in zip(methods, chosen))
    return UnitProfile(probability.unsqueeze(1) - kept, p.argmax(-1), prediction, probability,
                       tuple(u.name for u in units), tuple(u.stage for u in units), labels,
                       tuple(n if c else "" for n, c in zip(names, chosen)), residual, references)  # fmt: skip


__all__ = ["BRANCHES", "DEFAULT", "MEAN", "REFERENCES", "RESAMPLE", "RESAMPLES", "SKIP", "Branch", "Method", "Target",
           "UnitProfile", "branch_of", "branched", "intervene", "method_label", "reference_inputs"]  # fmt: skip
