"""Each bundled head's class for every input of its test split, stored beside it for the tests.

    python scripts/bundled_predictions.py            # every head under models/ (a frozen backbone's pass once)
    python scripts/bundled_predictions.py --only cifar10-cnn

Writes ``models/<setting>/<head>/test_predictions.safetensors``: ``prediction int16 (N,)`` in the split's order,
with the command and ``n`` in its metadata. ``tests/training/test_bundled_models.py`` reads the report's accuracy
back from it over the whole split and checks the model still gives those classes on a seeded class-balanced sample,
instead of a pass over the whole split per head in every run of the suite. Rerun after a head is retrained.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from laya.data.features import cached_hidden_states, hidden_states  # noqa: E402
from laya.model.checkpoint import load_checkpoint  # noqa: E402

FILE = "test_predictions.safetensors"


def predictions(path: Path) -> torch.Tensor:
    """``(N,)`` the head's class for every input of its checkpoint's test split (a frozen backbone's hidden states
    cached in ``$LAYA_CACHE``, so a setting's other heads read them)."""
    ck = load_checkpoint(path)
    test = ck.load_data("test")
    extract = cached_hidden_states if ck.meta.backbone.freeze else hidden_states
    with torch.inference_mode():
        return ck.model.head(extract(ck.model.backbone, ck.preprocess, test.images, 500)).logits.argmax(-1)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=str(ROOT / "models"))
    p.add_argument("--only", help="one setting folder's name")
    args = p.parse_args(argv)
    heads = sorted(h.parent for h in Path(args.models).glob(f"{args.only or '*'}/*/model.json"))
    for head in heads:
        got = predictions(head)
        command = "python scripts/bundled_predictions.py" + (f" --only {args.only}" if args.only else "")
        save_file({"prediction": got.to(torch.int16)}, str(head / FILE), metadata={"command": command,
                                                                                 "n": str(len(got))})  # fmt: skip
        print(f"{head.relative_to(Path(args.models))}: {len(got)} test predictions -> {FILE}", flush=True)


if __name__ == "__main__":
    main()
