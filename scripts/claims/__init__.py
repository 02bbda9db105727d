"""Sentence and table generators: every figure in README.md and the docs is printed here from the result files.

A generator is ``(arg: str) -> str``: it reads the files named by ``arg`` (a path relative to the repository) and
returns Markdown ending in a newline. A page embeds it as a generated block,

    <!-- generated: NAME ARG -->
    ...what CLAIMS[NAME](ARG) prints...
    <!-- /generated -->

which ``python scripts/prose_claims.py --write`` rewrites and ``python scripts/prose_claims.py`` checks. One file per
topic; each exports ``CLAIMS`` (name -> generator), merged below. Direction words come from
``laya.analysis.statistics``: ``holm_verdict`` for a family of comparisons stated together (Holm-corrected, the
correction named in the text), ``saving_verdict`` for a saving against its own timing noise.
"""

from __future__ import annotations

from collections.abc import Callable

from claims import (benchmarks, breadth, comparisons, counts, depth, environment, install, network, paper, spatial, speed,
                    tables, veit)

CLAIMS: dict[str, Callable[[str], str]] = {
    **comparisons.CLAIMS, **tables.CLAIMS, **spatial.CLAIMS, **paper.CLAIMS, **speed.CLAIMS, **counts.CLAIMS,
    **depth.CLAIMS, **benchmarks.CLAIMS, **breadth.CLAIMS, **install.CLAIMS, **environment.CLAIMS, **network.CLAIMS,
    **veit.CLAIMS,
}  # fmt: skip
