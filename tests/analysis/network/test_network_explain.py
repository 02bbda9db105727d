"""One input explained by the network's own units: the unit profile on a transformer block's branch, at unit and
stage granularity, and what a network without branches gets."""

import io

import torch
from PIL import Image

from laya.analysis.network.explain import explain_network, profile_units
from tests.model.backbones.test_calls import own_checkpoint


def _images() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    images = torch.randint(0, 256, (4, 3, 32, 32), dtype=torch.uint8)
    return images[0], images[1:]


def test_a_vit_s_profile_on_one_branch_at_either_granularity() -> None:
    """A transformers ViT's layers offer their branches as units and as the stages the backbone reads (the same
    modules); the pre-logits stage has none and gets the whole-block intervention, named so. Its lens is the logit
    lens (no tuned lens beside an in-memory checkpoint)."""
    checkpoint = own_checkpoint("transformers")
    image, references = _images()
    stages = profile_units(checkpoint, "stage")
    assert [(s.name, s.branches) for s in stages] == [
        (f"vit.layers.{i}", (f"vit.layers.{i}.attention", f"vit.layers.{i}.mlp")) for i in range(2)
    ] + [("pre-logits", ())]
    block = explain_network(checkpoint, image, references)
    assert block.branched and block.branch == "block" and block.lens_source == "logit lens"
    assert block.methods == ("resample of the whole block",) * 2
    for branch, word in (("attention", "attention"), ("mlp", "MLP")):
        chosen = explain_network(checkpoint, image, references, branch=branch)
        assert chosen.branch == branch and chosen.methods == (f"resample of {word}",) * 2
        assert (chosen.drops - block.drops).abs().min() > 1e-6
        by_stage = explain_network(checkpoint, image, references, granularity="stage", branch=branch)
        assert by_stage.methods == (f"resample of {word}",) * 2 + ("resample of the whole block",)
        assert torch.allclose(by_stage.drops[:2], chosen.drops, atol=1e-6)  # the same modules and references


def test_a_network_without_branches_offers_none() -> None:
    checkpoint = own_checkpoint("torchvision")
    image, references = _images()
    block = explain_network(checkpoint, image, references)
    chosen = explain_network(checkpoint, image, references, branch="mlp")
    assert not block.branched and set(block.methods) == {"resample"}
    assert set(chosen.methods) == {"resample of the whole block"} and torch.equal(chosen.drops, block.drops)
    units = {u.name: u.layer for u in profile_units(checkpoint, "unit")}
    assert block.layers == tuple(units[n] for n in block.names)  # each bar's layer among the heads' layers
    assert list(block.layers) == sorted(block.layers) and len(set(block.layers)) > 1
    stages = explain_network(checkpoint, image, references, granularity="stage")
    assert stages.layers == tuple(range(len(stages.names)))  # a stage is its own layer


def test_a_checkpoint_records_its_references_once(monkeypatch) -> None:
    """The references' pass runs for a checkpoint's first input only: later inputs with the same reference images
    reuse it, with the profile the images themselves give; other images, another branch or weights changed in
    place record anew; at most KEPT recordings stay per model."""
    from laya.analysis.network import explain, interventions

    checkpoint = own_checkpoint("torchvision")
    image, references = _images()
    recordings = []
    record = interventions.record_references
    monkeypatch.setattr(explain, "record_references", lambda *a, **k: recordings.append(a[3]) or record(*a, **k))
    first = explain_network(checkpoint, image, references)
    again = explain_network(checkpoint, references[0], references)
    assert len(recordings) == 1
    model = checkpoint.model
    x = checkpoint.preprocess(torch.cat([references[:1], references]))
    plain = interventions.intervene(model, x[:1], profile_units(checkpoint), "resample", x[1:])
    assert torch.allclose(again.drops, plain.drops[0].float(), atol=1e-6) and not torch.equal(first.drops, again.drops)
    explain_network(checkpoint, image, references.flip(0))
    explain_network(checkpoint, image, references, branch="mlp")
    assert len(recordings) == 3
    with torch.no_grad():
        next(model.parameters()).mul_(1.5)
    explain_network(checkpoint, image, references)
    assert len(recordings) == 4 and len(explain._RECORDED[model]) == explain.KEPT


def test_the_training_split_is_read_once_per_model(monkeypatch) -> None:
    """Drawing K references lists and checks every file of the training split: done for a model's first input,
    kept for the next (the same draw), per reference size; without the split, the bundled examples."""
    from laya.analysis.network.explain import EXAMPLES, TRAINING, references_for
    from laya.data.datasets import DatasetNotFoundError, ImageArrays

    checkpoint = own_checkpoint("torchvision")
    reads = []
    split = ImageArrays(torch.randint(0, 256, (40, 3, 32, 32), dtype=torch.uint8), torch.arange(40) % 4,
                        ("a", "b", "c", "d"))  # fmt: skip
    monkeypatch.setattr(checkpoint, "load_data", lambda name: reads.append(name) or split)
    first, source = references_for(checkpoint, "resample")
    again, _ = references_for(checkpoint, "skip")
    assert source == TRAINING and reads == ["train"] and torch.equal(first, again) and len(first) == 8
    assert len(references_for(checkpoint, "mean")[0]) == 40 and reads == ["train"] * 2  # 256 asked, 40 there
    other = own_checkpoint("torchvision")
    monkeypatch.setattr(other, "load_data", lambda name: (_ for _ in ()).throw(DatasetNotFoundError("absent")))
    image, _ = _images()
    png = io.BytesIO()
    Image.fromarray(image.permute(1, 2, 0).numpy()).save(png, format="PNG")
    examples, source = references_for(other, "resample", [png.getvalue()])
    assert source == EXAMPLES and torch.equal(examples[0], image)
