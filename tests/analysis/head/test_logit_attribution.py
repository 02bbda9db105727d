import pytest
import torch

from laya.analysis.head.logit_attribution import class_mean_terms, logit_attribution, top_class_table
from tests.model.test_heads import DIMS, hidden, make


@pytest.mark.parametrize("name", ["laya", "scalarmix", "concat", "lastlayer"])
def test_terms_sum_to_the_logits_of_a_float32_model(name):
    head, h = make(name).float(), hidden(batch=7, dtype=torch.float32)
    if name == "scalarmix":  # a non-trivial gamma and weights
        head.gamma.data.fill_(1.7)
        head.w.data = torch.tensor([0.3, -1.0, 2.0])
    attribution = logit_attribution(head, h)
    assert attribution.terms.shape == (7, len(DIMS), 4) and attribution.terms.dtype == torch.float64
    with torch.no_grad():
        logits = head(h).logits.double()
    assert (attribution.logits - logits).abs().max() < 1e-5


def test_lastlayer_votes_only_with_its_last_layer_and_laya_terms_are_alpha_weighted():
    head, h = make("lastlayer"), hidden()
    terms = logit_attribution(head, h).terms
    assert terms[:, :2].abs().max() == 0 and terms[:, 2].abs().max() > 0
    laya, h = make("laya"), hidden()
    terms = logit_attribution(laya, h).terms
    (z,) = laya.encode(h)
    alpha = laya.alpha(z)
    assert torch.allclose(terms[:, 1], alpha[:, 1:2] * (z[:, 1] @ laya.classifier.weight.T))


def test_tables():
    head, h = make("concat"), hidden(batch=5)
    attribution = logit_attribution(head, h)
    table = top_class_table(attribution, 2, ["a", "b", "c", "d"], ["x", "y", "z"], k=2)
    assert len(table) == 2 * 4
    best = int(attribution.logits[2].argmax())
    assert table.groupby("class", sort=False)["contribution"].sum().iloc[0] == pytest.approx(
        float(attribution.logits[2, best])
    )
    pred = torch.tensor([0, 0, 1, 1, 1])
    means = class_mean_terms(attribution, pred, ["a", "b", "c", "d"], ["x", "y", "z"])
    assert means.loc[(means["class"] == "a") & (means["layer"] == "y"), "mean"].item() == pytest.approx(
        float(attribution.terms[:2, 1, 0].mean())
    )
    assert (
        means.loc[means["class"] == "c", "mean"].isna().all() and (means.loc[means["class"] == "b", "count"] == 3).all()
    )
