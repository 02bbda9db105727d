"""The tuned lens's fit (Belrose et al., 2023): one affine translator per unit, from the identity, trained on a
sample of training inputs to the network's own final distribution, each until its KL on a held-out part of the
sample stops improving (``docs/decisions/tuned-lens-stopping.md``); and the summary that judges a lens per unit
beside the logit lens and the best constant distribution. The lens itself, its storage and figures:
:mod:`laya.analysis.network.lens`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
import torch
from torch import Tensor, nn

from laya.analysis.depth.layer_lens import Lens
from laya.analysis.network.lens import (
    Readout,
    TunedLens,
    TunedLensConfig,
    own_readout,
    pooled_units,
    read_translated,
)
from laya.analysis.network.recording import as_network
from laya.analysis.sample import sample_indices
from laya.data.datasets import Images, batch_indices
from laya.data.features import image_batches
from laya.model.hooks import pass_rows
from laya.model.sharding import Shard, broadcast_module


def held_out_split(n: int, share: float, seed: int, labels: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Sorted ``(train, held)`` positions in ``range(n)``: a seeded share ``share`` held out, per class where
    ``labels (n,)`` are given (``round(share * n_c)`` of each class's ``n_c``), else of all ``n``.

    Raises:
        ValueError: ``share`` outside (0, 1), or a split that leaves either part empty.
    """
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    groups = [order] if labels is None else [order[labels[order] == c] for c in torch.unique(labels)]
    held = torch.cat([g[: round(share * len(g))] for g in groups])
    chosen = torch.zeros(n, dtype=torch.bool)
    chosen[held] = True
    if not 0 < share < 1 or not 0 < int(chosen.sum()) < n:
        raise ValueError(f"the tuned lens needs a held-out share in (0, 1) that leaves inputs on both sides; got "
                         f"{share} of {n} inputs ({int(chosen.sum())} held out)")  # fmt: skip
    return torch.nonzero(~chosen)[:, 0], torch.nonzero(chosen)[:, 0]


def fit_tuned_lens(
    model: nn.Module, inputs: Images | Tensor, units: Sequence[str], labels: Tensor | None = None,
    config: TunedLensConfig | None = None, command: str = "", preprocess: Callable[[Tensor], Tensor] | None = None,
) -> TunedLens:  # fmt: skip
    """Fit a :class:`TunedLens` on training ``inputs (N, C, H, W)`` (preprocessed, or the images ``preprocess``
    makes the network's inputs of; or a split, decoded or streamed: read one batch at a time, so that only the
    pooled units of the sample are ever held whole; ``labels (N,)``, where given, make the sample of
    ``config.sample`` and its held-out part class-balanced, both drawn with ``config.seed``):
    the network runs once per batch on its device, then Adam minimises ``sum_u mean_b KL(p_b || q_{b,u})`` over
    the cached pooled outputs of the training part. After every epoch each translator's mean KL on the held-out
    part is measured; a translator whose KL has not improved for ``config.patience`` epochs stops (the translators
    are independent: one unit's stopping changes no other's gradient), and each keeps its best state by held-out
    KL; ``config.epochs`` caps them all. The network's weights get no gradient (``torch.autograd.grad`` on the
    translators only). ``config`` gives the fitting options (its shape fields are taken from the network);
    ``config.fit`` records the fit (:func:`_train`)."""
    network = as_network(model)
    readout = own_readout(network)
    options = {} if config is None else {k: v for k, v in config.to_dict().items() if k in FIT_OPTIONS}
    shape = TunedLensConfig([], [], 1, 1, **options)
    if labels is not None:
        chosen = sample_indices(labels, shape.sample, shape.seed)
    else:
        chosen = torch.randperm(len(inputs), generator=torch.Generator().manual_seed(shape.seed))[: shape.sample]
        chosen = chosen.sort().values
    train, held = held_out_split(len(chosen), shape.held_out, shape.seed, None if labels is None else labels[chosen])
    device = next(network.parameters()).device
    batches = batch_indices(len(chosen), shape.batch_size)
    shard = Shard.of(batches)  # under torchrun: this process's batches, gathered back in order below
    pooled, log_p = [], []  # per batch: U tensors (b, d_u); (b, K)
    from tqdm.auto import tqdm

    step = 0
    with torch.no_grad():
        for b in tqdm(shard.run, desc="tuned lens: the units on its sample", unit="batch", leave=False,
                      disable=shard.rank != 0):  # fmt: skip
            x = next(image_batches(inputs, [chosen[batches[b]]]))
            x = (x if preprocess is None else preprocess(x)).to(device)
            step = step or pass_rows(network, x, len(x))  # a 224 px batch in passes within PASS_BYTES
            passes = [pooled_units(network, readout, part, units) for part in x.split(step)]
            pooled.append([torch.cat(unit) for unit in zip(*(vectors for vectors, _ in passes))])
            log_p.append(torch.log_softmax(torch.cat([logits for _, logits in passes]).float(), -1))
    rows = [shard.gather(unit) for unit in zip(*pooled)]  # U tensors (N, d_u)
    dims, classes = [r.shape[1] for r in rows], log_p[0].shape[1]
    config = TunedLensConfig(list(units), dims, readout.width, classes, readout.space, command=command, **options)
    lens = TunedLens(config).to(device)
    _train(lens, readout, rows, shard.gather(log_p), train.to(device), held.to(device))
    broadcast_module(lens)  # every process fitted the same lens; the main one's is the one they all go on with
    config.fit["split"] = "class-balanced" if labels is not None else "random"
    return lens.eval()


FIT_OPTIONS = ("sample", "held_out", "epochs", "patience", "batch_size", "lr", "seed")
EXACT = 1e-6  # nats: the largest KL on the fit sample at which an identity-started translator is kept as it is


def _kl(log_p: Tensor, log_q: Tensor) -> Tensor:
    """``KL(p || q)`` over the last axis; ``log_p (b, K)``, ``log_q (b, U, K)`` -> ``(b, U)``."""
    p = log_p.unsqueeze(1)
    return (p.exp() * (p - log_q)).sum(-1)


def constant_kl(log_p: Tensor, constant: Tensor) -> Tensor:
    """``(b,)`` ``KL(p_b || c)`` of the final distributions ``log_p (b, K)`` to one constant distribution
    ``c (K,)``: what a predictor that never sees the input scores, the bar a lens must beat."""
    return _kl(log_p, constant.clamp_min(torch.finfo(constant.dtype).tiny).log().view(1, 1, -1))[:, 0]


def _train(lens: TunedLens, readout: Readout, rows: list[Tensor], log_p: Tensor, train: Tensor, held: Tensor) -> None:
    """Adam on ``lens``'s translators over cached pooled ``rows`` (U tensors ``(N, d_u)``) and final ``log_p (N, K)``
    at positions ``train``, each translator stopped and rewound to its best by mean KL at positions ``held``
    (:func:`fit_tuned_lens`). A translator whose identity start already gives the final distribution on every
    fitted input (KL at most :data:`EXACT`; a ResNet's last unit, whose mean is the pre-logits, a ViT's last block
    read through its own norm and head) is left at the identity: Adam's first steps, of size ``lr`` whatever the
    gradient, would otherwise move it off the network (``fit["exact"]`` names those units).

    ``lens.config.fit``, all on the held-out part, per unit where a list: ``train``, ``held_out`` (inputs),
    ``epochs_run``, ``best_epoch`` (0: the start), ``kl`` (mean KL at the best), ``agreement`` (share whose lens
    class is the network's prediction), ``logit_kl`` (the logit lens's KL; None where it does not apply),
    ``constant`` (the mean final distribution over the training part, ``(K,)``) and ``constant_kl`` (its KL),
    ``exact``."""
    config = lens.config
    generator = torch.Generator().manual_seed(config.seed)
    U = len(rows)

    def kl(index: Tensor, units: Sequence[int]) -> Tensor:  # (len(units),) mean KL(p || q_u) over the rows
        translated = torch.stack([lens.translators[u](rows[u][index]) for u in units], 1)
        return _kl(log_p[index], torch.log_softmax(read_translated(readout, translated).float(), -1)).mean(0)

    with torch.no_grad():  # a translator whose start is already the network (a ResNet's last unit) stays so
        exact = (_kl(log_p, torch.log_softmax(read_translated(readout, lens(rows)).float(), -1)).amax(0) <= EXACT).tolist()
        best = kl(held, range(U)).tolist()
    active = [u for u in range(U) if not exact[u]]
    state = [{k: v.clone() for k, v in t.state_dict().items()} for t in lens.translators]
    best_epoch, epochs_run, waited = [0] * U, [0] * U, [0] * U
    optimizer = torch.optim.Adam(lens.parameters(), lr=config.lr)  # a parameter whose grad is None is not stepped
    for epoch in range(1, config.epochs + 1):
        if not active:
            break
        params = [p for u in active for p in lens.translators[u].parameters()]
        for index in train[torch.randperm(len(train), generator=generator).to(train.device)].split(config.batch_size):
            with torch.enable_grad():
                grads = torch.autograd.grad(kl(index, active).sum(), params)
            for p, g in zip(params, grads):
                p.grad = g
            optimizer.step()
        with torch.no_grad():
            now = kl(held, active).tolist()
        for u, value in zip(list(active), now):
            epochs_run[u], waited[u] = epoch, waited[u] + 1
            if value < best[u]:
                best[u], best_epoch[u], waited[u] = value, epoch, 0
                state[u] = {k: v.clone() for k, v in lens.translators[u].state_dict().items()}
            elif waited[u] >= config.patience:
                active.remove(u)
                for p in lens.translators[u].parameters():
                    p.grad = None
    for t, kept in zip(lens.translators, state):
        t.load_state_dict(kept)
        for p in t.parameters():
            p.grad = None
    with torch.no_grad():
        read = Lens(torch.log_softmax(read_translated(readout, lens([r[held] for r in rows])).float(), -1), log_p[held],
                    "tuned lens")  # fmt: skip
        logit = None
        if readout.space == "residual":
            logit = Lens(torch.log_softmax(read_translated(readout, torch.stack([r[held] for r in rows], 1)).float(), -1),
                         log_p[held], "logit lens")  # fmt: skip
        constant = log_p[train].exp().mean(0)
        summary = lens_summary(read, config.units, constant, logit)
    config.fit = {"train": len(train), "held_out": len(held), "epochs_run": epochs_run, "best_epoch": best_epoch,
                  "kl": best, "agreement": summary["agreement"].tolist(),
                  "logit_kl": None if logit is None else summary["logit_kl"].tolist(), "constant": constant.tolist(),
                  "constant_kl": float(summary["constant_kl"].iloc[0]),
                  "exact": [u for u, fixed in zip(config.units, exact) if fixed]}  # fmt: skip


def lens_summary(
    lens: Lens, units: Sequence[str], constant: Tensor | None = None, logit: Lens | None = None
) -> pd.DataFrame:  # fmt: skip
    """Per unit, means over ``lens``'s inputs: ``kl`` (its KL to the final distribution, nats), ``logit_kl`` (the
    ``logit`` lens's on the same inputs; NaN where none is given: it does not apply), ``constant_kl`` (of the one
    distribution ``constant (K,)`` whatever the input, :func:`constant_kl`: a lens that does not beat it reads
    nothing of the input at that unit; NaN where none is given), ``agreement`` (share of inputs whose lens class is
    the network's prediction)."""
    nan = [float("nan")] * len(units)
    floor = nan if constant is None else [float(constant_kl(lens.log_p, constant.to(lens.log_p)).mean())] * len(units)
    return pd.DataFrame({
        "unit": list(units),
        "kl": lens.kl.double().mean(0).tolist(),
        "logit_kl": nan if logit is None else logit.kl.double().mean(0).tolist(),
        "constant_kl": floor,
        "agreement": (lens.log_q.argmax(-1) == lens.final.unsqueeze(1)).double().mean(0).tolist(),
    })  # fmt: skip


def lens_line(units: Sequence[str], agrees: Tensor, fit: dict) -> str:
    """One line: per unit the share of the test inputs of ``agrees`` ``(N, U)`` (the tuned lens's class is the
    network's prediction) that agree; a unit whose translator was kept at the identity because it already is the
    network (``fit["exact"]``) is named as equal by construction."""
    exact = set(fit.get("exact", []))
    shares = [f"{unit} {share:.1%}" + (" (identity translator: equal by construction)" if unit in exact else "")
              for unit, share in zip(units, agrees.double().mean(0).tolist())]  # fmt: skip
    return f"Tuned lens = the network's class, per unit, on {len(agrees):,} test inputs: " + ", ".join(shares)


__all__ = ["EXACT", "FIT_OPTIONS", "constant_kl", "fit_tuned_lens", "held_out_split", "lens_line", "lens_summary"]
