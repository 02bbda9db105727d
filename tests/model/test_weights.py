"""Weights files: read safely and within budget, then fitted to the architecture exactly by name."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from laya.model.weights import WeightsError, WeightsMismatch, fit_state_dict, load_weights, read_state_dict


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
    assert load_weights(target, str(tmp_path / "w.pt")) == ()
    assert all(torch.equal(a, b) for a, b in zip(source.state_dict().values(), target.state_dict().values()))
    with pytest.raises(FileNotFoundError, match="weights file 'nope.pt' not found"):
        load_weights(target, "nope.pt")
