"""Counts that change with the product, printed where the prose needs them: what ``models/`` ships, the dashboard's
pages, the tutorial's measured total, how many seeds of a head have one informative layer.

Free prose states no count of checkpoints, settings, heads, seeds, pages or backbone families (``prose_claims.py``);
a page that needs one embeds a block of this file.
"""

from __future__ import annotations

import re

import pandas as pd

from claims.common import ROOT

WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten"}


def _word(n: int) -> str:
    return WORDS.get(n, str(n))


def _heads() -> str:
    """How many heads the bundled settings ship, in words: "four heads each" where every setting ships the same
    number (the paper's four, or an attached network's own classifier and the three fitted beside it), else the
    range ("two to four heads each": an attached network may ship its own classifier and one fitted head)."""
    counts = sorted({len(list(s.glob("*/model.json"))) for s in (ROOT / "models").iterdir() if s.is_dir()})
    if not counts:
        raise ValueError("models/ ships no setting")
    words = _word(counts[0]) if len(counts) == 1 else f"{_word(counts[0])} to {_word(counts[-1])}"
    return f"{words} heads each"


def bundle_counts(arg: str) -> str:
    """``bundle-counts``: what ``models/`` ships, counted from its folders (``models/<setting>/<head>/model.json``)."""
    from laya.model.backbones import BACKBONES

    checkpoints = len(list(ROOT.glob("models/*/*/model.json")))
    settings = len([p for p in (ROOT / "models").iterdir() if p.is_dir()])
    return (f"It ships {checkpoints} bundled checkpoints: {_word(settings)} settings of {_heads()}, "
            f"on backbones of the {_word(len(BACKBONES))} families it reads.\n")


def dashboard_pages(arg: str) -> str:
    """``dashboard-pages``: the pages of the dashboard's top bar (``app.py``'s ``st.Page``, hidden aliases aside)."""
    text = (ROOT / "app.py").read_text()
    pages = text.count("st.Page(") - text.count('visibility="hidden"')
    return f"The dashboard has the {_word(pages)} pages of its top bar ([The dashboard](dashboard.md)).\n"


def tutorial_total(arg: str) -> str:
    """``tutorial-total docs/tutorial.md``: the tutorial's measured total (its ``tutorial-times`` block, written by
    ``python scripts/tutorial.py --write`` from its own run), in seconds and whole minutes."""
    text = (ROOT / arg).read_text()
    block = text[text.index("<!-- tutorial-times:start -->"): text.index("<!-- tutorial-times:end -->")]
    total = int(re.search(r"\| \*\*total\*\* \| \*\*(\d+)\*\* \|", block).group(1))
    cores = re.search(r"Linux, (\d+) CPU cores", block).group(1)
    return (f"Measured by `python scripts/tutorial.py --write`: {total} s from the first command to the dashboard "
            f"(about {max(1, round(total / 60))} min) on {cores} CPU cores shared with other jobs; each step's time is "
            f"under [Measured time of each step](#measured-time-of-each-step).\n")


def informative_seeds(arg: str) -> str:
    """``informative-seeds SETTING HEAD``: in how many seeds HEAD's primary scores have one informative layer under
    the headline intervention ``mean`` (``results.csv``'s status per seed), so its faithfulness is n/a."""
    setting, head = arg.split()
    results = pd.read_csv(ROOT / setting / "results.csv")
    rows = results[(results["head"] == head) & (results["mode"] == "mean") & (results["primary"].astype(str) == "True")]
    per_seed = rows.groupby("seed")["status"].apply(lambda s: (s == "n/a (one informative layer)").all())
    return (f"In {int(per_seed.sum())} of its {len(per_seed)} seeds the `{head}` head of `{setting}` has one "
            f"informative layer under intervention `mean` (`results.csv`), so its faithfulness there is n/a.\n")


CLAIMS = {"tutorial-total": tutorial_total, "informative-seeds": informative_seeds, "bundle-counts": bundle_counts,
          "dashboard-pages": dashboard_pages}  # fmt: skip
