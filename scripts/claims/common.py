"""What the claim generators share: the repository root, the bundled checkpoints, wrapped paragraphs, Holm-worded
differences."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # `python scripts/...` from a checkout
sys.path.insert(0, str(ROOT / "scripts"))  # the scripts whose output the generators quote

from laya.analysis.statistics import BEFORE_CORRECTION, format_diff, holm, holm_reading, holm_verdict  # noqa: E402

WORDS = {"higher": "above", "lower": "below", "tie": "ties with", BEFORE_CORRECTION: f"{BEFORE_CORRECTION}, against"}


def p_text(p: float) -> str:
    """``p = 0.024``; ``p < 0.001`` for a bootstrap p of 0 (no resample crossed 0 in 1,000)."""
    return "p < 0.001" if p == 0 else f"p = {p:.2g}"


def family(rows: list[tuple[str, str, float, float, float, float]]) -> list[str]:
    """``rows`` of ``(a, b, difference, low, high, p)`` stated together, each as ``"a above b (+d [l, h], p = …,
    Holm p = …)"``: the direction word from the CI and the Holm-adjusted p over the whole family
    (:func:`holm_reading`: a tie where the CI covers 0; "significant before correction, not after" where the
    unadjusted CI printed excludes 0 but the adjusted p exceeds 0.05)."""
    adjusted = holm([r[5] for r in rows])
    return [f"{a} {WORDS[holm_reading(low, high, adj)]} {b} ({format_diff(d, low, high)}, {p_text(p)}, "
            f"Holm {p_text(adj)})" for (a, b, d, low, high, p), adj in zip(rows, adjusted)]  # fmt: skip


def checkpoints(file: str) -> list[Path]:
    """The bundled checkpoints (``models/<setting>/<head>``) that hold ``file``."""
    return sorted(p.parent for p in (ROOT / "models").glob(f"*/*/{file}"))


def wrapped(text: str, width: int = 120) -> str:
    """``text`` with every line but table rows wrapped at ``width`` (a bullet's or an indented block's lines keep
    its indent), so a generated paragraph reads like a written one."""
    import textwrap

    out = []
    for line in text.split("\n"):
        if line.startswith("|") or len(line) <= width:
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        first = lead + ("* " if line.lstrip().startswith("* ") else "")
        out += textwrap.wrap(line[len(first):], width, initial_indent=first, subsequent_indent=" " * len(first),
                             break_long_words=False, break_on_hyphens=False)  # fmt: skip
    return "\n".join(out)
