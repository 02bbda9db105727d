"""Counts in prose: a whole number, or a number word, that counts something is a claim.

``counts_in(prose)`` finds every count in free prose (``prose_claims.masked`` text): an integer (``16``,
``1,000``) or a number word (``two`` … ``twenty``, ``a dozen``, ``a hundred``; ``one`` is left out, it reads
as "a single" far more often than as a count), then up to two modifying words, then a counted noun
(``COUNTED``), spaced or hyphenated (``16 trained checkpoints``, ``four settings``, ``a 5-block CNN``,
``about five minutes``); and every quantifier over seeds, settings or checkpoints (``in every seed``, ``in all
settings``). A count passes only where its noun phrase is registered in ``COUNTS`` and the number equals what
the registered source counts now; anything else is reported. A count that is not structural is generated
(``tutorial-total``, ``informative-seeds``) or left out; a setting is written as code naming it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pandas as pd

from claims.common import ROOT

WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
         "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
         "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
         "eighty": 80, "ninety": 90, "a dozen": 12,
         "a hundred": 100, "a thousand": 1000}  # fmt: skip

#: the nouns a number counts in prose (singular too: ``a 5-block CNN``, ``a 10-class head``)
COUNTED = ("checkpoints?", "settings?", "heads?", "seeds?", "pages?", "architectures?", "tests", "images?",
           "classes", "class", "layers?", "blocks?", "famil(?:y|ies)", "backbones?", "minutes?", "hours?",
           "seconds?")  # fmt: skip
_NUMBER = r"\d{1,3}(?:,\d{3})+|\d+|" + "|".join(sorted(WORDS, key=len, reverse=True))
#: words that end a noun phrase rather than modify its noun (``two of three seeds`` counts three seeds)
_STOP = r"(?:of|and|or|per|to|in|on|at|for|by|from|with|the|a|an|is|are|was|were|px|than|x|×)"
#: a number, up to two modifiers, a counted noun; not a term of a formula (``L + 1 backbone passes``)
_GAP = r"(?:-|[ \t]*\n[ \t]*|[ \t]+)"  # a space, a hyphen or a line break (prose wraps anywhere)
COUNT = re.compile(rf"(?<![\w.,/-])(?<![+×*−-] )(?P<number>{_NUMBER})(?P<phrase>(?:{_GAP}(?!{_STOP}\b)[A-Za-z][\w-]*?){{0,2}}"
                   rf"{_GAP}(?:{'|'.join(COUNTED)}))\b(?!-)", re.I)  # fmt: skip
#: a quantifier over the units a result is repeated on: ``in every seed``, ``across all settings``
QUANTIFIER = re.compile(r"\b(?:in|on|across|over|for)\s+(?:every|all(?:\s+the)?|both|no|none\s+of\s+the)\s+"
                        r"(?:seeds?|settings?|checkpoints?)\b", re.I)  # fmt: skip


def _checkpoints() -> int:
    return len(list(ROOT.glob("models/*/*/model.json")))


def _settings() -> int:
    return len([p for p in (ROOT / "models").iterdir() if p.is_dir()])


def _heads() -> int:
    """How many heads every bundled setting ships (the same number in each: the paper's four, or an attached
    network's own classifier and the three fitted beside it)."""
    heads = {s.name: sorted(p.parent.name for p in s.glob("*/model.json")) for s in (ROOT / "models").iterdir()
             if s.is_dir()}  # fmt: skip
    if len({len(h) for h in heads.values()}) != 1:
        raise ValueError(f"the bundled settings ship different numbers of heads: {heads}")
    return len(next(iter(heads.values())))


def _pages() -> int:
    """The dashboard's pages in its navigation (``app.py``), hidden aliases aside."""
    text = (ROOT / "app.py").read_text()
    return text.count("st.Page(") - text.count('visibility="hidden"')


def _families() -> int:
    from laya.model.backbones import BACKBONES

    return len(BACKBONES)


#: noun phrase (the words after the number, lower case) -> (what counts it now, where); a count in prose passes
#: only with a registered phrase and the number the source gives
COUNTS: dict[str, tuple[Callable[[], int], str]] = {
    r"(?:trained |bundled )?checkpoints": (_checkpoints, "models/*/*/model.json"),
    r"(?:bundled )?settings": (_settings, "the folders of models/"),
    r"heads": (_heads, "the heads of each bundled setting, models/<setting>/*/"),
    r"pages": (_pages, "app.py's st.navigation, hidden pages aside"),
    r"(?:backbone )?families": (_families, "laya.model.backbones.BACKBONES"),
}


def value(number: str) -> int:
    return WORDS[number.lower()] if number.lower() in WORDS else int(number.replace(",", ""))


def counts_in(prose: str) -> list[tuple[int, str, str]]:
    """``(offset, text, problem)`` for every count and quantifier in ``prose`` (free prose, ``masked``) that is not
    a registered count with its source's number."""
    out = []
    for m in COUNT.finditer(prose):
        phrase = " ".join(m.group("phrase").lower().replace("-", " ").split())
        registered = [(f, src) for pattern, (f, src) in COUNTS.items() if re.fullmatch(pattern, phrase)]
        if not registered:
            out.append((m.start(), " ".join(m.group().split()), "count in free prose"))
            continue
        (count, source), = registered
        if value(m.group("number")) != count():
            out.append((m.start(), " ".join(m.group().split()), f"count in free prose is {count()} in {source}"))
    out += [(m.start(), " ".join(m.group().split()), "quantifier in free prose") for m in QUANTIFIER.finditer(prose)]
    return sorted(out)


# --- generators of counts that are results, not structure ------------------------------------------------------

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


CLAIMS = {"tutorial-total": tutorial_total, "informative-seeds": informative_seeds}
