"""Cost of the interpretability engine relative to plain inference, per bundled LAYA model.

    python benchmarks/interpretability_speed.py [--threads 1] [--n 1000] [--eval-n 10000]

For each ``models/<setting>/laya`` checkpoint, measured in one run on its test images:
* LOO over all layers (backbone once + one batched float64 head call under L+1 masks) vs one
  plain forward — target <= 1.3x — and the naive loop that reruns the model per mask (~(L+1)x);
* intrinsic attribution (alpha comes out of the forward pass) vs Integrated Gradients with 32
  steps — over the head's inputs (the post-hoc baseline the dashboard uses) and over the pixels
  through the whole network (classic IG) — target: intrinsic >= 20x cheaper;
* full evaluation (every metric of ``laya evaluate``, with its bootstrap CIs) of ``--eval-n`` images vs plain inference.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import torch
from captum.attr import IntegratedGradients
from common import interleaved_seconds, parser, seconds, test_images

from laya.analysis.evaluate import EvalOptions, evaluate
from laya.analysis.head.ablation import leave_one_out, loo_masks
from laya.analysis.head.attribution import layer_attributions
from laya.data.datasets import DatasetNotFoundError, ImageArrays
from laya.model.checkpoint import load_checkpoint
from laya.model.heads import ABLATION_MODES


def batches(x: torch.Tensor, size: int) -> list[torch.Tensor]:
    return [x[i : i + size] for i in range(0, len(x), size)]


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1000, help="images for the LOO / attribution timings")
    p.add_argument("--eval-n", type=int, default=10000, help="images for the full-evaluation timing")
    p.add_argument("--batch", type=int, default=500)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    os.environ["LAYA_CACHE"] = tempfile.mkdtemp(prefix="laya-bench-")  # frozen-backbone features are not pre-cached
    print(f"torch threads {torch.get_num_threads()}")
    for path in sorted(Path(args.models).glob("*/laya")):
        ck = load_checkpoint(path)
        model, head, pre = ck.model, ck.model.head, ck.preprocess
        images, source = test_images(ck, args.n)
        chunks = [pre(b) for b in batches(images, args.batch)]
        L = head.num_layers
        print(f"\n== {path.parent.name} (L = {L}, {source}, batch {args.batch})")

        def plain():
            for x in chunks:
                model(x)

        def loo():
            for x in chunks:
                leave_one_out(head, model.backbone(x))

        masks = loo_masks(L)[0]

        def naive():
            for x in chunks:
                for keep in masks:
                    model(x, keep)

        def ig_head():
            for x in chunks:
                out = model(x)
                layer_attributions(head, out.hidden, "integrated_gradients", out.prediction, steps=32)

        with torch.inference_mode():
            t_plain, t_loo = interleaved_seconds({"plain": plain, "loo": loo}).values()
            t_naive = seconds(naive, min_run_time=0.1)
        t_ig_head = seconds(ig_head)
        # classic IG over the pixels: 32 forward+backward passes of the whole network, on a subset
        few = chunks[0][: min(64, len(chunks[0]))]
        ig = IntegratedGradients(lambda x: torch.softmax(model(x).logits, -1))
        with torch.inference_mode():
            target = model(few).prediction
            t_plain_few = seconds(lambda: model(few))
        t_ig_input = seconds(lambda: ig.attribute(few, target=target, n_steps=32, internal_batch_size=len(few) * 8))
        print(f"plain forward              {t_plain:8.3f} s   1.00x")
        print(f"LOO, all layers (batched)  {t_loo:8.3f} s   {t_loo / t_plain:5.2f}x   (target <= 1.3x)")
        print(f"LOO, naive per-mask loop   {t_naive:8.3f} s   {t_naive / t_plain:5.2f}x   (L + 1 = {L + 1})")
        print(f"intrinsic alpha (forward)  {t_plain:8.3f} s   1.00x")
        print(
            f"IG-32 over head inputs     {t_ig_head:8.3f} s   {t_ig_head / t_plain:5.2f}x   intrinsic is {t_ig_head / t_plain:.1f}x cheaper"
        )
        print(f"IG-32 over pixels          {t_ig_input / t_plain_few:8.2f}x a forward of the same {len(few)} images"
              f"   intrinsic is {t_ig_input / t_plain_few:.1f}x cheaper (target >= 20x)")  # fmt: skip
        try:
            data = ck.load_data("test")
            data = data.subset(torch.arange(min(args.eval_n, len(data))))
        except DatasetNotFoundError:
            random_images = test_images(ck, args.eval_n)[0]
            data = ImageArrays(random_images, torch.zeros(len(random_images), dtype=torch.long), ck.meta.classes)
        everything = batches(data.images, args.batch)
        with torch.inference_mode():
            t_infer = seconds(lambda: [model(pre(b)) for b in everything], min_run_time=0.1)
        start = time.perf_counter()
        evaluate(ck, data, EvalOptions(batch_size=args.batch))
        t_eval = time.perf_counter() - start
        print(f"full evaluation, {len(data)} images: {t_eval:.1f} s vs plain inference {t_infer:.2f} s = {t_eval / t_infer:.1f}x"
              f" (every method incl. IG-32, {len(ABLATION_MODES)} interventions x 2 reductions, deletion curves,"
              " profiles, 95% bootstrap CIs)")  # fmt: skip


if __name__ == "__main__":
    main()
