"""What the dashboard calls heads, layer-score methods and ablation modes, and what each mode and reduction does.

:func:`head_title` names a head (``laya`` -> ``LAYA``; an attached network's own head -> :data:`OWN_TITLE`),
:func:`method_label` a method (post-hoc ones marked), :func:`mode_label` an intervention and :func:`entry_label`
one checkpoint of the catalog; :data:`MODE_HELP` and :data:`REDUCTION_HELP` say what each mode and reduction does.
"""

from __future__ import annotations

from laya.analysis.head.attribution import METHOD_LABELS, POSTHOC_METHODS
from laya.app.catalog import Entry
from laya.app.numbers import number_text
from laya.model.heads import CROSS_HEAD_MODES, HEAD_LABELS
from laya.model.own_head import OWN

MODE_HELP = {
    "mean": "the layer's hidden state h_i is replaced by its training mean before the head; everything downstream "
    "(LAYA: adapters, scorer, α) is recomputed. The same intervention for every head: comparable across heads",
    "zero_input": "h_i is replaced by zeros before the head (LAYA/ScalarMix: α recomputed; Concat/LastLayer: the "
    "same as zero). The same intervention for every head: comparable across heads",
    "zero": "the paper's definition: LAYA/ScalarMix drop the term α_i z_i with α frozen (the scorer still reads "
    "layer i); Concat/LastLayer zero the input. A different intervention per head: not comparable across heads",
    "renormalise": "LAYA/ScalarMix only: the softmax is recomputed over the remaining layers' scores",
}
REDUCTION_HELP = {
    "signed": "post-hoc layer score Σ_j A_ij: signed like the LOO drop it is compared with (the headline)",
    "magnitude": "post-hoc layer score Σ_j |A_ij|: how much the layer moves the output either way",
}


OWN_TITLE = "Own classifier"  # an attached network's own head (a LastLayer head holding its exact classifier)
OWN_NOTE = ("The own classifier reads the network's pre-logits layer alone, so a head's views over the layers it "
            "reads (layer scores, leave-one-layer-out, exact maps) have one informative layer by construction; the "
            "network is explained by its units instead (the heads fitted on its layers: LAYA, ScalarMix, Concat).")


def head_title(name: str) -> str:
    """``laya`` -> ``LAYA``, ``lastlayer`` -> ``LastLayer``, ``own`` -> :data:`OWN_TITLE`; unknown names unchanged."""
    return OWN_TITLE if name == OWN else HEAD_LABELS.get(name, name)


def method_label(method: str) -> str:
    """Human name of an attribution method; post-hoc methods are marked as such."""
    label = METHOD_LABELS.get(method, method)
    return f"{label} (post-hoc)" if is_posthoc(method) else label


def is_posthoc(method: str) -> bool:
    return method in POSTHOC_METHODS


def is_weight(method: str) -> bool:
    """Whether ``method``'s layer scores are weights in [0, 1] (LAYA α, ScalarMix): a spread must stay inside."""
    return method in ("laya_alpha", "scalarmix_weights")


def mode_label(mode: str) -> str:
    """``mean`` -> ``mean (cross-head)``, ``zero`` -> ``zero (paper, frozen α)``."""
    if mode in CROSS_HEAD_MODES:
        return f"{mode} (cross-head)"
    return {"zero": "zero (paper, frozen α)"}.get(mode, mode)


def entry_label(entry: Entry) -> str:
    """One catalog line: head, test accuracy and headline faithfulness (or why there is none) from the report."""
    if entry.error:
        return f"{entry.path.name}: unreadable"
    if entry.accuracy is None:
        return f"{head_title(entry.head)} · no report"
    if entry.head == OWN:  # the network as it is: no layer ranking to test (one informative layer)
        return f"{OWN_TITLE} · acc {number_text(entry.accuracy)}"
    faithfulness = entry.faithfulness_status or f"ρε {number_text(entry.faithfulness, 2)}"
    return f"{head_title(entry.head)} · acc {number_text(entry.accuracy)} · faithfulness {faithfulness}"


__all__ = [
    "MODE_HELP",
    "OWN_NOTE",
    "OWN_TITLE",
    "REDUCTION_HELP",
    "entry_label",
    "head_title",
    "is_posthoc",
    "is_weight",
    "method_label",
    "mode_label",
]
