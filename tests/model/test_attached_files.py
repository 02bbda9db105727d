"""The reader of an attached setting's stored files: confinement to the setting folder, bounded JSON, the
safetensors header checked before any tensor is read."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from laya.model.attached_files import (
    AttachedFileError,
    attached_file,
    read_bytes,
    read_json,
    read_tensors,
    tensor_header,
)
from tests.hostile import STORED_CASES, stored_setting


@pytest.fixture
def own(tmp_path: Path) -> Path:
    folder = tmp_path / "setting" / "own"
    folder.mkdir(parents=True)
    return folder


def test_files_inside_the_setting_are_read_and_links_out_are_refused(own: Path, tmp_path: Path) -> None:
    assert attached_file(own, "absent.json") is None
    (own.parent / "shared.json").write_text("{}")
    (own / "inside.json").symlink_to(own.parent / "shared.json")  # a link within the setting folder
    assert attached_file(own, "inside.json") == (own.parent / "shared.json").resolve()
    (tmp_path / "secret.json").write_text('{"key": 1}')
    (own / "out.json").symlink_to(tmp_path / "secret.json")
    (own / "dangling.json").symlink_to(tmp_path / "nowhere.json")
    for name in ("out.json", "dangling.json"):
        with pytest.raises(AttachedFileError, match=f"^{name} links outside its setting folder") as refused:
            attached_file(own, name)
        assert refused.value.file == name and str(tmp_path) not in str(refused.value)
    (own / "folder.json").mkdir()
    with pytest.raises(AttachedFileError, match="not a regular file"):
        attached_file(own, "folder.json")


def test_json_is_bounded_in_bytes_depth_and_digits(own: Path) -> None:
    path = own / "x.json"
    path.write_text('{"units": ["a"]}')
    assert read_json(path, "x.json", 100) == {"units": ["a"]}
    for text, message in (("[" * 20 + "]" * 20, "over 30 bytes"), ("[" * 100_000 + "]" * 100_000, "nested too deep"),
                          ("1" * 50, "integer of 50 digits"), ("{", "not valid JSON")):  # fmt: skip
        path.write_text(text)
        with pytest.raises(AttachedFileError, match=message):
            read_json(path, "x.json", 30 if message.startswith("over") else 10**6)


def test_a_safetensors_header_is_read_alone_and_bounded(own: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = own / "x.safetensors"
    save_file({"a": torch.zeros(3, 4), "b": torch.ones(2, dtype=torch.int64)}, path)
    assert tensor_header(path, "x.safetensors") == {"a": ((3, 4), torch.float32), "b": ((2,), torch.int64)}
    assert torch.equal(read_tensors(path, "x.safetensors")["b"], torch.ones(2, dtype=torch.int64))
    monkeypatch.setenv("LAYA_MAX_PARAMS", "10")
    with pytest.raises(AttachedFileError, match="holds 14 elements, over the limit of 10"):
        tensor_header(path, "x.safetensors")
    path.write_bytes(path.read_bytes()[:-8])  # the body cut short
    with pytest.raises(AttachedFileError, match="x.safetensors is not a valid safetensors file"):
        tensor_header(path, "x.safetensors")


def test_a_file_the_system_will_not_read_is_refused_naming_it(own: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``OSError`` (permissions, a device error) escaped as itself and took the unit profile down with the lens
    (issue 43): it is the file's refusal now, naming the file and the kind of error, never the server path."""
    from laya.model import attached_files, header

    (own / "x.json").write_text("{}")
    save_file({"a": torch.zeros(2)}, own / "x.safetensors")

    def denied(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    for module in (attached_files, header):
        monkeypatch.setattr(module, "open", denied, raising=False)
    for read, name in ((lambda: read_json(own / "x.json", "x.json", 100), "x.json"),
                       (lambda: tensor_header(own / "x.safetensors", "x.safetensors"), "x.safetensors")):  # fmt: skip
        with pytest.raises(AttachedFileError, match=rf"^{name} cannot be read \(PermissionError\)$") as refused:
            read()
        assert refused.value.file == name and str(own) not in str(refused.value)


def test_a_file_over_its_bound_is_refused_before_it_is_read(own: Path) -> None:
    path = own / "big.bin"
    path.write_bytes(b"x" * 101)
    with pytest.raises(AttachedFileError, match="big.bin is over 100 bytes; it is not read"):
        read_bytes(path, "big.bin", 100)
    assert read_bytes(path, "big.bin", 101) == b"x" * 101


def _read(kind: str, own: Path) -> object:
    """The loader a page uses for ``kind`` (tests/hostile.py ``StoredCase.read``), on the head folder ``own``."""
    from laya.analysis.depth.exits_record import load_exits
    from laya.analysis.depth.fit import DepthFit
    from laya.analysis.depth.layer_lens import load_lens
    from laya.analysis.depth.report import DepthReport
    from laya.analysis.report import Report
    from laya.analysis.sample import Sample
    from laya.app.seed_views import read_class_profiles
    from laya.app.verdicts import load_per_input
    from laya.training.bundle import _command

    return {"sample": Sample.load, "depth": DepthReport.load, "depth_fit": DepthFit.load, "report": Report.load,
            "per_input": load_per_input, "lens_csv": load_lens, "class_profiles": lambda o: read_class_profiles(o.parent),
            "model_card": lambda o: _command(o.parent), "exits": load_exits}[kind](own)  # fmt: skip


def test_every_stored_file_reads_as_it_is(tmp_path: Path) -> None:
    """The bundled own head's files, copied into a setting folder, read with the same loaders (one mechanism for a
    bundled setting and an attached one)."""
    own = stored_setting(tmp_path)
    for kind in ("sample", "depth", "depth_fit", "report", "lens_csv", "class_profiles", "exits"):
        assert _read(kind, own) is not None, kind
    assert _read("per_input", own) is None  # the bundled heads do not ship them
    assert _read("model_card", own).startswith("python -m laya attach")


@pytest.mark.parametrize("case", STORED_CASES, ids=lambda c: c.name)
def test_every_stored_file_is_read_as_untrusted_input(case, tmp_path: Path) -> None:
    """Every file a setting stores beside its head and a page reads back (sample, depth report and fit, evaluation
    report and its per-input arrays, lens.csv, class_profiles.csv, network.json for the model card, exits.json),
    broken one way: one AttachedFileError naming the file and what is wrong, never its server path, never another
    error (they were read with ``json.loads(read_text())``, ``load_file`` and ``pd.read_csv``, unbounded and
    unchecked)."""
    own = stored_setting(tmp_path)
    case.write(own)
    with pytest.raises(AttachedFileError, match=re.escape(case.message)) as refused:
        _read(case.read, own)
    assert refused.value.file == case.file and case.file in str(refused.value)
    assert str(tmp_path) not in str(refused.value)


def test_an_example_image_is_sized_before_it_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from laya.app import catalog
    from laya.data.images import ImageError

    path = tmp_path / "big.png"
    path.write_bytes(b"x" * 101)
    monkeypatch.setattr(catalog, "MAX_BYTES", 100)
    with pytest.raises(ImageError, match=r"^big.png is over 100 bytes; it is not read$"):
        catalog.read_example(path)


def test_a_depth_fit_of_other_shapes_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A ``depth_fit.safetensors`` whose probe is narrower than its layer loaded, and the forward pass of the Depth
    page raised a RuntimeError (the fuzzer's find, issue 43): given the checkpoint it is for, its header is compared
    with the shapes that checkpoint's layers and classes imply before a tensor is read."""
    from safetensors import safe_open

    from laya.analysis.depth.fit import FIT_FILE, DepthFit
    from laya.model.checkpoint import load_checkpoint
    from tests.hostile import BUNDLED_SETTING

    own = stored_setting(tmp_path)
    shutil.copy(BUNDLED_SETTING / "backbone.safetensors", own.parent / "backbone.safetensors")
    checkpoint = load_checkpoint(own)
    assert DepthFit.load(own, checkpoint) is not None
    with safe_open(str(own / FIT_FILE), "pt") as handle:
        metadata, tensors = handle.metadata(), {k: handle.get_tensor(k) for k in handle.keys()}
    tensors["probe_weight_1"] = tensors["probe_weight_1"][:, :-1].contiguous()
    save_file(tensors, own / FIT_FILE, metadata)
    assert DepthFit.load(own) is not None  # well-formed on its own
    with pytest.raises(AttachedFileError, match=re.escape(f"{FIT_FILE}: ['probe_weight_1'] are not floating-point "
                                                          "tensors of the shapes the checkpoint's layers")):
        DepthFit.load(own, checkpoint)
    fit, note = DepthFit.usable(checkpoint)
    assert fit is None and note.startswith(f"The stored depth fit cannot be used ({FIT_FILE}: ['probe_weight_1']")
