"""laya.app.input_images: the model's input as the page shows it, equal to the pixels the model read."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from laya.analysis.head.explain import explain_bytes
from laya.app.input_images import model_view
from laya.data.datasets import InputSpec
from laya.model.checkpoint import load_checkpoint


def test_model_view_undoes_normalisation(setting: Path, example: bytes) -> None:
    checkpoint = load_checkpoint(setting / "laya")
    explanation = explain_bytes(checkpoint, example)
    view = model_view(explanation, checkpoint.meta.input, min_side=96)
    image = explanation.image.permute(1, 2, 0).numpy()  # source size == model size for this checkpoint
    factor = -(-96 // image.shape[0])  # nearest-neighbour enlargement to at least 96 px
    assert view.dtype == np.uint8 and view.shape == (image.shape[0] * factor, image.shape[1] * factor, 3)
    assert np.abs(view[::factor, ::factor].astype(int) - image.astype(int)).max() <= 1
    spec = InputSpec(channels=1, source_size=4, size=4, mean=(0.5,), std=(0.25,))
    normalised = SimpleNamespace(model_input=(torch.full((1, 4, 4), 0.25) - 0.5) / 0.25)
    grey = model_view(normalised, spec, min_side=10)  # type: ignore[arg-type]
    assert grey.shape == (12, 12) and (grey == 64).all()
