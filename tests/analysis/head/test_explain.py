import io
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from laya.analysis.head.ablation import leave_one_out
from laya.analysis.head.explain import explain, explain_bytes
from laya.data.images import ImageError, load_image_tensor
from laya.model.checkpoint import load_checkpoint


@pytest.fixture(scope="module")
def laya_ck(tiny_models):
    return load_checkpoint(tiny_models / "colours-mlp" / "laya")


def red_png(size: int = 20) -> bytes:
    pixels = np.zeros((size, size, 3), dtype=np.uint8)
    pixels[..., 0] = 200
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()


def test_explanation_matches_the_model_and_batched_loo(laya_ck):
    e = explain_bytes(laya_ck, red_png())
    x = laya_ck.preprocess(e.image.unsqueeze(0))
    with torch.no_grad():
        out = laya_ck.model(x)
    assert e.label == "red"
    assert torch.allclose(e.probs, out.probs[0], atol=1e-6)
    assert torch.allclose(e.scores["laya_alpha"], out.layer_scores[0], atol=1e-6)
    loo = leave_one_out(laya_ck.model.head, out.hidden)
    assert torch.allclose(e.drops, loo.drops[0])
    table = e.layer_table()
    assert list(table["layer"]) == ["block 1", "block 2", "block 3"]
    assert table["LOO drop"].tolist() == pytest.approx(loo.drops[0].tolist())
    assert e.deletion_at_1("laya_alpha") == pytest.approx(float(loo.drops[0, out.layer_scores[0].argmax()]))
    assert e.topk(2)["class"].iloc[0] == "red"
    assert set(e.to_dict()) >= {"prediction", "confidence", "layers", "methods"}


def test_posthoc_methods_and_heads_without_intrinsic_scores(tiny_models, laya_ck):
    e = explain_bytes(laya_ck, red_png(), posthoc=("integrated_gradients", "saliency"))
    assert list(e.scores) == ["laya_alpha", "integrated_gradients", "saliency"]
    assert len(e.summary()) == 3
    concat = load_checkpoint(tiny_models / "colours-mlp" / "concat")
    c = explain_bytes(concat, red_png())
    assert c.intrinsic is None and list(c.scores) == ["integrated_gradients"] and c.primary == "integrated_gradients"


@pytest.mark.parametrize("mode", ["zero", "mean", "renormalise"])
def test_ablation_modes(laya_ck, mode):
    e = explain_bytes(laya_ck, red_png(), mode=mode)
    assert e.mode == mode and e.drops.shape == (3,)


def test_bad_inputs(laya_ck):
    with pytest.raises(ImageError):
        explain_bytes(laya_ck, b"garbage")
    with pytest.raises(ImageError, match="empty"):
        explain_bytes(laya_ck, b"")
    with pytest.raises(ValueError, match="expected a uint8 image"):
        explain(laya_ck, torch.zeros(1, 8, 8, dtype=torch.uint8))


def test_lastlayer_input_shows_no_tie_decided_spearman(tiny_models):
    ck = load_checkpoint(tiny_models / "colours-mlp" / "lastlayer")
    e = explain_bytes(ck, red_png(), posthoc=("integrated_gradients", "saliency"))
    assert not e.testable and e.status == "n/a (one informative layer)"
    for method in e.scores:  # every post-hoc method ranks the last layer first: ρ = 1 by ties alone
        assert e.spearman(method) is None and e.metrics(method)["top1"] is None
    assert e.summary()["spearman"].isna().all()


@pytest.mark.parametrize("setting", ["fashion-mnist-mlp", "cifar10-vit"])
def test_ood_scores_come_from_the_explanations_own_pass_equal_to_depth_analytics(setting):
    """Inspect's uncertainty and OOD status: the same scores as ``input_depth`` (Depth analytics), to float64
    rounding (Inspect's come from the leave-one-out's first mask, Depth analytics' from a plain head call), without a
    second backbone pass or a second head call."""

    from laya.analysis.depth.fit import DepthFit
    from laya.analysis.depth.input_depth import input_depth
    from laya.data.images import load_image_tensor

    root = Path(__file__).resolve().parents[3] / "models" / setting
    checkpoint = load_checkpoint(root / "laya")
    spec = checkpoint.meta.input
    image = load_image_tensor(sorted((root / "examples").iterdir())[0], spec.channels, spec.source_size)
    fit = DepthFit.load(checkpoint.path)
    calls = []
    handle = checkpoint.model.backbone.register_forward_hook(lambda *a: calls.append(1))
    e = explain(checkpoint, image, ood=True, fit=fit, approximate=False)
    handle.remove()
    assert len(calls) == 1
    expected = input_depth(checkpoint, image, fit).scores
    assert e.ood_scores == pytest.approx(expected, rel=1e-12, abs=1e-12) and {"msp", "mahalanobis"} <= set(expected)
    assert explain(checkpoint, image).ood_scores is None
    shown = explain(checkpoint, image, ood=("msp", "mahalanobis"), fit=fit, approximate=False).ood_scores
    assert shown == {k: e.ood_scores[k] for k in ("msp", "mahalanobis")}  # what a page shows, and nothing else
    from laya.analysis.head.explain import Explanation

    assert Explanation.from_tensors(*e.to_tensors()).ood_scores == e.ood_scores  # as a sandboxed worker hands it over


BUNDLED = sorted(p.parent for p in (Path(__file__).resolve().parents[3] / "models").glob("*/*/model.json"))


@pytest.mark.parametrize("path", BUNDLED, ids=[f"{p.parent.name}/{p.name}" for p in BUNDLED])
def test_shared_work_gives_the_numbers_of_the_unshared_computation_on_every_bundled_checkpoint(path):
    """Inspect's explanation shares work: the float64 copy keeps its fills' projections, the maps take the layer
    weights from LOO instead of encoding the head again, IG runs in one batched pass. Against the computation
    without any of that: LOO and IG bit for bit; the maps, terms and offsets within 1e-5 of their largest value (LAYA's
    alpha from LOO's first mask instead of a plain head call), still exact."""
    import copy

    from captum.attr import IntegratedGradients

    from laya.analysis.head.ablation import float64_head, loo_masks
    from laya.analysis.head.attribution import _summed_target_probability, reduce_layers
    from laya.analysis.head.spatial import decompose, keep_maps
    from laya.data.images import load_image_tensor

    ck = load_checkpoint(path)
    spec = ck.meta.input
    image = load_image_tensor(sorted((path.parent / "examples").iterdir())[0], spec.channels, spec.source_size)
    e = explain(ck, image, approximate=False)
    head, backbone = ck.model.head, ck.model.backbone
    with torch.inference_mode(), keep_maps(backbone) as features:
        hidden = backbone(ck.preprocess(image.unsqueeze(0)))
        fresh = copy.deepcopy(head).double()  # every product afresh: no fill projection kept
        out = fresh.decode(fresh.encode([h.double() for h in hidden]), loo_masks(head.num_layers), e.mode)
    p = torch.softmax(out.logits, -1)[0, :, e.prediction]
    assert torch.equal(e.drops, p[0] - p[1:]) and torch.equal(e.probs, torch.softmax(out.logits[0, 0], -1).float())
    if e.spatial is not None:
        unshared = decompose(head, hidden, features, e.spatial.classes)  # the head encoded again, in float64
        for new, old in [(e.spatial.terms, unshared.terms), (e.spatial.offsets, unshared.offsets),
                         *[(a, b) for a, b in zip(e.spatial.maps, unshared.maps) if b is not None]]:  # fmt: skip
            assert (new - old).abs().max() <= 1e-5 * old.abs().max() + 1e-12
        if exact := [i for i, m in enumerate(e.spatial.maps) if m is not None]:
            assert (e.spatial.layer_sums()[:, exact] - e.spatial.terms[:, exact]).abs().max() < 1e-5
    if e.intrinsic is None:  # IG-32 in Captum, as the bundled reports were made
        inputs = tuple(h.double().clone().requires_grad_() for h in hidden)
        head64 = float64_head(head)
        baselines = tuple(r.expand_as(h) for r, h in zip(head64.references, inputs))
        parts = IntegratedGradients(_summed_target_probability(head64, e.loo.prediction)).attribute(
            inputs, baselines=baselines, n_steps=32, method="gausslegendre"
        )
        assert torch.equal(e.scores["integrated_gradients"], reduce_layers(parts, "signed")[0])


def test_an_explanation_times_its_own_stages(tiny_models, laya_ck):
    """``Explanation.seconds``: each stage this call ran (in :data:`STAGES`' order), positive, and handed over by a
    worker; the OOD status and post-hoc methods only when computed."""
    from laya.analysis.head.explain import STAGES, Explanation

    image = torch.zeros(laya_ck.meta.input.channels, laya_ck.meta.input.source_size, laya_ck.meta.input.source_size,
                        dtype=torch.uint8)  # fmt: skip
    e = explain(laya_ck, image)
    assert list(e.seconds) == [s for s in STAGES if s in e.seconds] and {"forward", "leave-one-out"} <= set(e.seconds)
    assert "post hoc" not in e.seconds and "OOD status" not in e.seconds and min(e.seconds.values()) > 0
    assert "post hoc" in explain(laya_ck, image, posthoc=("saliency",)).seconds
    assert Explanation.from_tensors(*e.to_tensors()).seconds == e.seconds


def reference(checkpoint, data: bytes, **kwargs):
    """``explain`` of ``data`` decoded by hand: what ``explain_bytes`` must give."""
    spec = checkpoint.meta.input
    return explain(checkpoint, load_image_tensor(data, spec.channels, spec.source_size), **kwargs)


def test_explanations_work_under_the_callers_grad_modes(tiny_models, laya_ck):
    """Post-hoc methods need gradients; explain lifts inference_mode/no_grad for them itself."""
    laya, concat, example = laya_ck, load_checkpoint(tiny_models / "colours-mlp" / "concat"), red_png()
    expected = reference(laya, example, mode="renormalise", posthoc=("saliency", "integrated_gradients"))
    for context in (torch.inference_mode, torch.no_grad):
        with context():
            shown = explain_bytes(laya, example, mode="renormalise", posthoc=("saliency", "integrated_gradients"))
            posthoc_only = explain_bytes(concat, example)
        assert shown.label == expected.label and shown.confidence == pytest.approx(expected.confidence)
        assert list(shown.scores) == ["laya_alpha", "saliency", "integrated_gradients"]
        assert all(torch.allclose(shown.scores[m], expected.scores[m]) for m in shown.scores)
        assert posthoc_only.intrinsic is None and list(posthoc_only.scores) == ["integrated_gradients"]
        assert torch.allclose(
            posthoc_only.scores["integrated_gradients"], reference(concat, example).scores["integrated_gradients"]
        )


def test_explain_is_safe_across_threads(tiny_models):
    """Dashboard sessions share one loaded model: concurrent explanations equal the serial one."""
    checkpoint = load_checkpoint(tiny_models / "colours-mlp" / "concat")  # post-hoc IG: gradients in every thread
    example = red_png()
    serial = explain_bytes(checkpoint, example, mode="mean", posthoc=("saliency",))
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(
            pool.map(lambda _: explain_bytes(checkpoint, example, mode="mean", posthoc=("saliency",)), range(8))
        )
    for result in results:
        assert torch.allclose(result.drops, serial.drops)
        assert all(torch.allclose(result.scores[m], serial.scores[m]) for m in serial.scores)
