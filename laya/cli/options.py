"""What the commands share: parent parsers for the options several commands take, argument types.

A parent parser (``argparse``'s ``parents=``) holds one option group once: ``--checkpoint``, ``--out``,
``--allow-import``, ``--resamples``, the device flags, the evaluation flags and the tuned-lens flags. A command's
parser lists the parents it takes, then adds its own options.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
from collections.abc import Iterator

CHECKPOINT_HELP = "checkpoint directory (model.json + model.safetensors)"
OUT_HELP = "output directory (default: the checkpoint's directory)"
ALLOW_IMPORT_HELP = (
    "a wrapped-module checkpoint: import and call the 'module:callable' it records to rebuild the module "
    "(runs that code; only for checkpoints you trust)"
)


def csv_ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from error


def csv_floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from error


def csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _parent() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(add_help=False)


def checkpoint_option(text: str = CHECKPOINT_HELP) -> argparse.ArgumentParser:
    """``--checkpoint DIR`` (required)."""
    parent = _parent()
    parent.add_argument("--checkpoint", required=True, help=text)
    return parent


def out_option(text: str = OUT_HELP) -> argparse.ArgumentParser:
    """``--out DIR``: where a command writes (default: the checkpoint's directory)."""
    parent = _parent()
    parent.add_argument("--out", help=text)
    return parent


def allow_import_option() -> argparse.ArgumentParser:
    """``--allow-import``: a wrapped-module checkpoint may import the code it records."""
    parent = _parent()
    parent.add_argument("--allow-import", action="store_true", help=ALLOW_IMPORT_HELP)
    return parent


def resamples_option(text: str = "bootstrap resamples") -> argparse.ArgumentParser:
    """``--resamples N`` (default 1000)."""
    parent = _parent()
    parent.add_argument("--resamples", type=int, default=1000, help=text)
    return parent


def device_options() -> argparse.ArgumentParser:
    """``--device``, ``--precision``, ``--stream``/``--no-stream``."""
    parent = _parent()
    parent.add_argument("--device", help="auto (default: CUDA when available) | cpu | cuda | cuda:N")
    parent.add_argument("--precision", choices=["float32", "bf16"], help="bf16: forward passes under autocast")
    parent.add_argument(
        "--stream",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="stream ImageFolder images from disk (default: only when the split is too large for memory)",
    )
    return parent


def evaluation_options() -> argparse.ArgumentParser:
    """The device flags and what :func:`to_eval_options` reads: modes, resamples, seed, IG steps, batch, limit."""
    parent = argparse.ArgumentParser(
        add_help=False, parents=[device_options(), resamples_option("bootstrap resamples for every CI")]
    )
    parent.add_argument("--modes", type=csv, help="ablation modes, comma-separated (default: every mode the head has)")
    parent.add_argument("--eval-seed", type=int, default=0, help="seed of the bootstrap and the random control")
    parent.add_argument("--ig-steps", type=int, default=32)
    parent.add_argument("--batch-size", type=int, default=500)
    parent.add_argument("--limit", type=int, default=None,
                        help="evaluate a class-balanced random sample of N test inputs (drawn with --eval-seed; "
                        "default: all)")  # fmt: skip
    return parent


def to_eval_options(args: argparse.Namespace) -> EvalOptions:  # noqa: F821
    """:class:`~laya.analysis.evaluate.EvalOptions` from the :func:`evaluation_options` flags."""
    from laya.analysis.evaluate import EvalOptions
    from laya.model.heads import ABLATION_MODES

    return EvalOptions(
        modes=tuple(args.modes or ABLATION_MODES),
        ig_steps=args.ig_steps,
        batch_size=args.batch_size,
        limit=args.limit,
        resamples=args.resamples,
        seed=args.eval_seed,
        precision=args.precision or "float32",
    )


def lens_options() -> argparse.ArgumentParser:
    """``--lens-sample``, ``--lens-epochs`` and ``--lens-patience``: how a tuned lens is fitted (``attach`` and
    ``network``; the last two default to :class:`~laya.analysis.network.lens.TunedLensConfig`'s, not imported here
    to keep ``--help`` free of torch)."""
    parent = _parent()
    parent.add_argument("--lens-sample", type=int, default=2000,
                        help="tuned lens: training inputs it is fitted on, a class-balanced sample of which a "
                        "class-balanced part is held out to stop the fit (default: 2000)")  # fmt: skip
    parent.add_argument("--lens-epochs", type=int,
                        help="tuned lens: the cap on the epochs of its fit (default: the library's, recorded in "
                        "tuned_lens.json)")  # fmt: skip
    parent.add_argument("--lens-patience", type=int,
                        help="tuned lens: epochs without a lower held-out KL after which a unit's translator stops "
                        "(default: the library's, recorded in tuned_lens.json)")  # fmt: skip
    return parent


def gradcam_option() -> argparse.ArgumentParser:
    """``--gradcam-sample``: test images of the network report's per-unit Grad-CAM test (``attach`` and ``network``;
    the default is :data:`~laya.analysis.network.gradcam_choice.SAMPLE`, not imported here to keep ``--help`` free of
    torch)."""
    parent = _parent()
    parent.add_argument("--gradcam-sample", type=int, default=50,
                        help="network report: test images on which every unit's Grad-CAM is tested against a random "
                        "map of its grid (insertion, ROAD, deletion), a class-balanced sample drawn with seed 0; 0 "
                        "skips the test (default: 50)")  # fmt: skip
    return parent


def _count_or_all(text: str) -> int | str:
    if text == "all":
        return text
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number of inputs (at least 1) or 'all'; got {text!r}")
    return value


def inputs_or_all(text: str) -> int | None:
    """``--limit``/``--train-limit`` of the depth commands: a number of inputs, or ``all`` (``None``: the whole
    split), as their recorded commands write it."""
    value = _count_or_all(text)
    return None if value == "all" else int(value)


def lesion_options() -> argparse.ArgumentParser:
    """``--lesion-draws`` and ``--lesion-limit``: the lesion study's random sets per k and its inputs (``attach`` and
    ``network``)."""
    parent = _parent()
    parent.add_argument("--lesion-draws", type=int, default=5,
                        help="lesion study: random sets of k units skipped at once, per k (default: 5)")  # fmt: skip
    parent.add_argument("--lesion-limit", type=_count_or_all,
                        help="lesion study: test inputs it is measured on, a class-balanced sample drawn with seed 0, "
                        "or 'all' (default: the network report's sample, --limit / --network-limit)")  # fmt: skip
    return parent


def lesion_settings(args: argparse.Namespace) -> dict[str, int | str | None]:
    """The :class:`~laya.analysis.network.report.NetworkOptions` fields of the lesion flags."""
    return {"lesion_draws": args.lesion_draws, "lesion_limit": args.lesion_limit}


def lens_settings(args: argparse.Namespace) -> dict[str, int]:
    """The :class:`~laya.analysis.network.report.NetworkOptions` fields of the lens flags that were given."""
    given = {"lens_sample": args.lens_sample, "lens_epochs": args.lens_epochs, "lens_patience": args.lens_patience}
    return {k: v for k, v in given.items() if v is not None}


class Terminated(KeyboardInterrupt):
    """SIGTERM received inside :func:`sigterm_as_interrupt`: unwinds like Ctrl-C, so that what was being written is
    removed (``laya.training.attach.whole_folder``)."""


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM (a scheduler's or torchrun's stop, ``kill``) raises :class:`Terminated` instead of
    ending the process where it stands; the handler that was there before is put back after."""

    def stop(signum: int, frame: object) -> None:
        raise Terminated(f"stopped by signal {signum}")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
