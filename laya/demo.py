"""The demo checkpoints: a first model with no checkout and no download.

A wheel carries ``laya/_demo/`` (copied from the checkout by ``setup.py`` when the wheel is built): the
bundled Fashion-MNIST MLP setting ``fashion-mnist-mlp`` with two of its four heads, LAYA and LastLayer,
each with its report, depth analytics, lens and browser sample, and the setting's example images and
summary. A checkout has no copy; there the demo is the checkout's own ``models/`` (all 16 checkpoints).
``laya dashboard`` with no ``--models`` opens it; the library reaches its files with :func:`demo_path`.
"""

from __future__ import annotations

from pathlib import Path

PACKAGED = Path(__file__).resolve().parent / "_demo"
CHECKOUT_MODELS = Path(__file__).resolve().parents[1] / "models"


def demo_models() -> Path:
    """The folder of demo checkpoints: the wheel's ``laya/_demo``, else the checkout's ``models/``."""
    for folder in (PACKAGED, CHECKOUT_MODELS):
        if folder.is_dir():
            return folder
    raise FileNotFoundError(
        f"no demo checkpoints: neither {PACKAGED} (a wheel) nor {CHECKOUT_MODELS} (a checkout) exists; "
        "reinstall laya, or give a folder of LAYA checkpoints with --models DIR"
    )


def demo_path(relative: str) -> Path:
    """A file or checkpoint of the demo, e.g. ``demo_path("fashion-mnist-mlp/laya")``."""
    path = demo_models() / relative
    if not path.exists():
        raise FileNotFoundError(f"the demo has no {relative!r}; it holds {sorted(p.name for p in demo_models().iterdir())}")
    return path


__all__ = ["demo_models", "demo_path"]
