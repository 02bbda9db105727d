"""Each family end to end: ``attach`` a tiny trained classifier, then every dashboard page for its own head and LAYA.

One attach run per family (timm, torchvision, transformers, a wrapped module), on the tiny generated ImageFolder,
with the weights file of exactly the architecture and class count attached; the pages are driven with
Streamlit's AppTest as ``laya dashboard --models OUT`` shows them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest
from torch import nn

from laya.app.catalog import describe
from laya.model.own_head import OWN
from laya.training.attach import AttachConfig, Attached, attach
from tests.model.test_own_head import TINY_VIT, _save
from tests.training.test_attach import QUICK

APP = Path(__file__).resolve().parents[2] / "app.py"
PAGES = ("inspect-input", "compare-heads", "class-depth", "faithfulness-overview", "depth-analytics", "browse-test-set",
         "activation-patching")
FAMILIES = ("timm", "torchvision", "transformers", "wrapped")


class Net(nn.Module):
    """A user's own 3-class network, given to ``attach`` as a module (and rebuilt by the dashboard from its path)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.stage = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU())
        self.fc = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc(self.stage(self.stem(x)).mean(dim=(2, 3)))


def make_net() -> Net:
    return Net()


def _weights(family: str, folder: Path) -> tuple[str | None, dict]:
    """The weights file of a tiny 3-class network of ``family`` (``"timm vit"``: timm's ``test_vit``, six blocks,
    4 patches at 32 px) and the config's ``model`` / ``model_kwargs``."""
    torch.manual_seed(0)
    if family == "timm vit":
        import timm

        network = timm.create_model("test_vit", num_classes=3, img_size=32)
        return _save(network, folder / "vit.pth"), {"model": "test_vit", "model_kwargs": {"img_size": 32}}
    if family == "timm":
        import timm

        return _save(timm.create_model("resnet10t", num_classes=3), folder / "timm.pth"), {"model": "resnet10t"}
    if family == "torchvision":
        import torchvision

        return _save(torchvision.models.resnet18(num_classes=3), folder / "tv.pth"), {"model": "resnet18"}
    if family == "transformers":
        from transformers import ViTConfig, ViTForImageClassification

        network = ViTForImageClassification(ViTConfig(**TINY_VIT, image_size=32, num_labels=3))
        return _save(network, folder / "hf.safetensors"), {"model": "vit", "model_kwargs": dict(TINY_VIT)}
    return None, {"model": None, "layers": ["stem", "stage"], "import_path": f"{__name__}:make_net"}


def attach_family(family: str, folder: Path, image_folder: Path) -> Attached:
    """``attach`` a tiny 3-class network of ``family`` on ``image_folder`` into ``folder``, one epoch, QUICK."""
    weights, model = _weights(family, folder)
    config = AttachConfig(family=family.split()[0], weights=weights, dataset=str(image_folder),
                          out=str(folder / "models"), setting=f"colours-{family.replace(' ', '-')}", image_size=32,
                          max_epochs=1, patience=1, **model, **QUICK)  # fmt: skip
    torch.manual_seed(0)
    return attach(config, **({"module": make_net()} if family == "wrapped" else {}))


@pytest.fixture(scope="module", params=FAMILIES)
def attached(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, image_folder: Path) -> Attached:
    if request.param == "torchvision":  # the run the own-network pages read too (tests/conftest.py)
        return request.getfixturevalue("attached_resnet")
    return attach_family(request.param, tmp_path_factory.mktemp(f"attach-{request.param}"), image_folder)


def test_every_page_renders_for_the_own_head_and_laya(
    attached: Attached, image_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert list(attached.heads) == [OWN, "laya", "scalarmix", "concat"]
    monkeypatch.setenv("LAYA_MODELS", str(attached.setting.parent))
    monkeypatch.setenv("LAYA_PATH_ROOTS", str(image_folder))
    monkeypatch.setenv("LAYA_ALLOW_IMPORT", "1")  # the wrapped module, rebuilt from its import path
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    group = describe(attached.heads["laya"]).group
    at.sidebar.selectbox(key="model_group").set_value(group).run()
    for head in (OWN, "laya"):
        at.switch_page("pages/inspect-input.py").run()
        at.sidebar.radio(key=f"model_head_{group}").set_value(str(attached.heads[head])).run()
        for page in PAGES:
            at.switch_page(f"pages/{page}.py").run()
            assert not at.exception, (head, page, [e.value for e in at.exception])
            assert not at.error, (head, page, [e.value for e in at.error])


@pytest.mark.parametrize("attached", ["transformers"], indirect=True)
def test_a_vit_s_unit_profile_chooses_its_branch(
    attached: Attached, image_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An attached ViT's Inspect page offers the branch of its blocks; flipped to attention, every bar names it and
    shows the drops of the attention branch alone (as computed in this process)."""
    from laya.analysis.network.explain import network_bytes
    from laya.app.catalog import example_images
    from laya.app.network_views import UNIT_PROFILE_TITLE
    from laya.model.checkpoint import load_checkpoint
    from tests.pages.test_own_pages import _start, charts, values

    at = _start(attached, image_folder, monkeypatch)
    assert charts(at)[UNIT_PROFILE_TITLE]["data"][0]["text"] == ["resample of the whole block"] * 2
    at.radio(key="inspect_network_branch").set_value("attention").run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    bars = charts(at)[UNIT_PROFILE_TITLE]["data"][0]
    assert bars["text"] == ["resample of attention"] * 2
    own = load_checkpoint(attached.heads[OWN])
    examples = [p.read_bytes() for p in example_images(attached.heads[OWN])]
    expected = network_bytes(own, examples[0], examples=examples, branch="attention")  # the page's first example
    block = network_bytes(own, examples[0], examples=examples)
    assert values(bars["y"]) == pytest.approx(expected.drops.tolist(), abs=1e-6)
    assert (expected.drops - block.drops).abs().max() > 1e-6
