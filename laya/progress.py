"""A ``progress(fraction, message)`` callback on a tqdm bar: what the long library calls (evaluation, depth
analytics) report their progress through, drawn by the command line and by ``laya attach``'s inner bars."""

from __future__ import annotations

from collections.abc import Callable


def progress_bar(desc: str, leave: bool = True) -> Callable[[float, str], None]:
    """A ``progress(fraction, message)`` callback drawing a tqdm bar labelled ``desc`` (``leave=False``: an inner
    bar, cleared when done)."""
    from tqdm.auto import tqdm

    bar = tqdm(total=100, desc=desc, unit="%", leave=leave)

    def progress(fraction: float, message: str) -> None:
        bar.set_postfix_str(message, refresh=False)
        bar.update(round(fraction * 100) - bar.n)
        if fraction >= 1.0:
            bar.close()

    return progress


__all__ = ["progress_bar"]
