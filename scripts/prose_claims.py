"""The docs quote the reports: figures live in generated blocks, and free prose holds none.

    python scripts/prose_claims.py            # check every page: stale blocks, figures in free prose
    python scripts/prose_claims.py --write    # regenerate every generated block in place
    python scripts/prose_claims.py --pages docs/x.md [...]   # the free-prose rule alone, on these pages

The pages are README.md, the model card (models/README.md) and every docs page but the generated API reference.

**Generated blocks** ``<!-- generated: NAME ARG -->`` ... ``<!-- /generated -->`` must equal what
``GENERATORS[NAME](ARG)`` (``scripts/claims/``) prints from the committed files now; so must the depth card and the
model card's table (between their own markers).

**Free prose** is what is left once generated blocks, the results overview table, the tutorial's measured block,
code blocks and spans, link targets, URLs, HTML comments and tags are blanked (``masked``). It may hold no
*figure* and no *verdict word* (``FIGURES``):

* a number with a decimal point (``0.73``), a percentage (``12 %``), a ratio (``1.5×``), a ``±``, an interval
  ``[a, b]``;
* a number, in digits or a word, with a unit of time, size or test outcome (``28 min``, ``6 MB``, ``868 passed``,
  ``about two minutes``) or before a counted noun (``20 bundled checkpoints``, ``four epochs``): checkpoints,
  settings, heads, seeds, epochs, pages, architectures, tests, images, classes, layers, blocks, families, backbones;
* a claim over every seed, setting or checkpoint (``in every seed``, ``across all settings``);
* a verdict word: beats, loses, ties, wins, saves, faster, slower, outperforms, within the noise.

Allowed, because they are not results: anything in a code span that holds more than a figure (``--lr 0.5``,
``LAYA_WORKER_TIMEOUT=120``), version numbers (``2.14.1``, ``Python ≥ 3.10``), the arXiv identifier, the confidence
level (``95 %``) and the significance level (``p ≤ 0.05``) (``ALLOWED``), numbers inside names (``CIFAR-10``,
``ResNet-18``), sizes (``224x224``), ordinals, dates and every other bare integer (a step of a list, ``seed 0``,
``batch 128``). A figure alone in a code span (```0.73```, ```300 s```) is still prose.

A page that needs a figure embeds a generated block (a new generator is one function and one line in a
``CLAIMS`` table of ``scripts/claims/``); direction words come from ``laya.analysis.statistics``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # `python scripts/...` from a checkout
sys.path.insert(0, str(ROOT / "scripts"))

from claims import CLAIMS  # noqa: E402  (the sentence and table generators, one file per topic)
from laya.training.bundle import CARD_END, CARD_START  # noqa: E402  (the model card's markers)

BLOCK = re.compile(r"<!-- generated: (?P<spec>[^>]*?) -->\n(?P<body>.*?)<!-- /generated -->", re.S)
DEPTH_CARD = re.compile(r"<!-- depth-card:start -->\n(?P<body>.*?)<!-- depth-card:end -->", re.S)
MODEL_CARD = re.compile(rf"{re.escape(CARD_START)}\n(?P<body>.*?){re.escape(CARD_END)}", re.S)
#: blocks other checks keep current: the results table (tests/docs/test_readme.py), the tutorial's own run
#: (``python scripts/tutorial.py --write``)
OVERVIEW = re.compile(r"<!-- results-overview:start -->\n.*?<!-- results-overview:end -->", re.S)
TUTORIAL_TIMES = re.compile(r"<!-- tutorial-times:start -->\n.*?<!-- tutorial-times:end -->", re.S)

GENERATORS: dict[str, Callable[[str], str]] = CLAIMS

# --- the rule ------------------------------------------------------------------------------------------------

_NUMBER = r"(?:\d{1,3}(?:,\d{3})+|\d+|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|a dozen|a hundred)"
_UNIT = r"(?:ms|µs|s|min|minutes?|seconds?|hours?|h|[kKMGT]i?B|CPU-s|passed|failed|skipped|errors|tests)"
_NOUN = (r"(?:checkpoints?|settings?|heads?|seeds?|epochs?|pages?|architectures?|tests|images?|class(?:es)?|layers?"
         r"|blocks?|famil(?:y|ies)|backbones?)")  # fmt: skip
#: words that end a count's noun phrase rather than modify its noun (``two of three seeds`` counts three seeds)
_STOP = r"(?:of|and|or|per|to|in|on|at|for|by|from|with|the|a|an|is|are|was|were|px|than|x|×)"
_BEFORE = r"(?<![\w.,/+×*−-])(?<![+×*−-] )"  # not inside a name (h27, e2e) or a formula (L + 1 backbone passes)

#: what free prose may not hold, each with the examples it names
FIGURES: dict[str, str] = {
    "a number with a decimal point (0.73, −0.261), not a version (2.14.1)": r"(?<![\w.])[+−-]?\d+\.\d+(?![\d.]*\w)",
    "a percentage (12 %)": r"(?<![\w.])\d+(?:\.\d+)? ?%",
    "a ratio (3×, 1.5x), not a size (224x224)": r"(?<![\w.])\d+(?:\.\d+)? ?[×x](?![\w\d])",
    "a ± with its number": r"± ?\d+(?:\.\d+)?",
    "an interval [a, b]": r"\[[+−-]?\d[\d.,]*, ?[+−-]?\d[\d.,]*\]",
    "a number with a unit of time, size or test outcome (28 min, 6 MB, 868 passed)":
        rf"{_BEFORE}(?:\d[\d,]* ?|{_NUMBER}[ \t]+){_UNIT}(?![\w-])",
    "a count (20 bundled checkpoints, four epochs, a 5-block CNN)":
        rf"{_BEFORE}\b{_NUMBER}(?:(?:[ \t\n]+|-)(?!{_STOP}\b)[A-Za-z][\w-]*?){{0,2}}(?:[ \t\n]+|-){_NOUN}\b(?!-)",
    "a claim over every seed, setting or checkpoint (in every seed)":
        r"\b(?:in|on|across|over|for)\s+(?:every|all(?:\s+the)?|both|no|none\s+of\s+the)\s+(?:seeds?|settings?|checkpoints?)\b",
    "a verdict word (beats, loses, ties, wins, saves, faster, slower, outperforms, within the noise)":
        r"\b(?:beats?|beaten|beating|loses?|lost|losing|ties?|tied|tying|wins?|won|winning|saves?|saved|savings?"
        r"|faster|slower|outperform(?:s|ed|ing)?|within the noise)\b",
}  # fmt: skip
FIGURE = re.compile("|".join(f"(?:{pattern})" for pattern in FIGURES.values()), re.I)
#: a figure in digits (the first six kinds): alone in a code span (`0.73`, `300 s`), it is still prose
IN_DIGITS = re.compile("|".join(f"(?:{pattern})" for pattern in list(FIGURES.values())[:6]), re.I)

#: constants a page may write by hand, each with why it is not a result
ALLOWED: dict[str, str] = {
    r"\b95 ?%": "the confidence level of every interval, a setting",
    r"Python (?:≥ ?)?3\.\d+": "a Python version",
    r"arXiv:? \d{4}\.\d{4,5}": "the paper's arXiv identifier",
    r"p (?:exceeds|>|≤) 0\.05": "the significance level of every test, a setting",
    r"1-minute load average": "the name of a load average, not a duration",
}
_ALLOWED = re.compile("|".join(f"(?:{pattern})" for pattern in ALLOWED))


def _blank(match: re.Match) -> str:
    return re.sub(r"[^\n]", " ", match.group())


def _code_span(match: re.Match) -> str:
    """A code span is blanked unless it holds a figure in digits and nothing else (`0.73`, `300 s`)."""
    return match.group() if IN_DIGITS.fullmatch(match.group()[1:-1].strip()) else _blank(match)


def masked(text: str) -> str:
    """``text`` with everything that is not free prose blanked, newlines kept (so line numbers hold)."""
    for pattern in (BLOCK, DEPTH_CARD, MODEL_CARD, OVERVIEW, TUTORIAL_TIMES, re.compile(r"```.*?```", re.S),
                    re.compile(r"<!--.*?-->", re.S)):  # fmt: skip
        text = pattern.sub(_blank, text)
    text = re.sub(r"`[^`\n]*`", _code_span, text)
    for pattern in (re.compile(r"(?<=\])\([^)\s]*\)"), re.compile(r"^\[[^\]]+\]: \S+", re.M), re.compile(r"https?://\S+"),
                    re.compile(r"</?[a-zA-Z][^>]*>")):  # fmt: skip
        text = pattern.sub(_blank, text)
    return text


def claims_in(text: str) -> list[tuple[int, str]]:
    """``(line number, figure)`` for every figure and verdict word in the free prose of ``text``, allowed constants
    aside."""
    prose = masked(text)
    allowed = [m.span() for m in _ALLOWED.finditer(prose)]
    return [(prose.count("\n", 0, m.start()) + 1, " ".join(m.group().split())) for m in FIGURE.finditer(prose)
            if not any(a <= m.start() and m.end() <= b for a, b in allowed)]  # fmt: skip


# --- the pages and the check ---------------------------------------------------------------------------------


def pages() -> list[Path]:
    """README.md, the model card (models/README.md) and every docs page but the generated API reference."""
    return [ROOT / "README.md", ROOT / "models" / "README.md",
            *sorted(p for p in (ROOT / "docs").rglob("*.md") if p.parent.name != "api")]


def generate(spec: str) -> str:
    name, _, arg = spec.strip().partition(" ")
    if name not in GENERATORS:
        raise ValueError(f"unknown generated block {name!r}; expected one of {sorted(GENERATORS)}")
    return GENERATORS[name](arg.strip())


def stale(path: Path) -> list[str]:
    """``"path: ..."`` for every generated block (and card) of ``path`` that is not what its generator prints now."""
    text, name = path.read_text(), path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    problems = [f"{name}: generated block '{m.group('spec')}' is stale" for m in BLOCK.finditer(text)
                if m.group("body") != generate(m.group("spec"))]  # fmt: skip
    problems += [f"{name}: the model card is stale (python scripts/prose_claims.py --write)"
                 for m in MODEL_CARD.finditer(text) if m.group("body") != generate("model-card")]  # fmt: skip
    return problems + [f"{name}: the depth card is stale (scripts/depth_all.sh)" for m in DEPTH_CARD.finditer(text)
                       if m.group("body") != generate("depth-card")]  # fmt: skip


def strict(paths: Iterable[Path]) -> list[str]:
    """``file:line: 'figure' in free prose: line`` for every figure and verdict word in the free prose of ``paths``."""
    offences = []
    for path in paths:
        text = path.read_text()
        lines, name = text.splitlines(), path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        offences += [f"{name}:{line}: '{figure}' in free prose: {lines[line - 1].strip()[:160]}"
                     for line, figure in claims_in(text)]  # fmt: skip
    return offences


def check_page(path: Path) -> list[str]:
    """Everything wrong with one page: its stale generated blocks and the figures in its free prose."""
    return stale(path) + strict([path])


def check() -> list[str]:
    return [problem for path in pages() for problem in check_page(path)]


def write() -> list[Path]:
    """Regenerate every generated block (and the depth and model cards) in place; the files changed."""
    changed = []
    for path in pages():
        text = path.read_text()
        new = BLOCK.sub(lambda m: f"<!-- generated: {m.group('spec')} -->\n{generate(m.group('spec'))}<!-- /generated -->", text)
        new = DEPTH_CARD.sub(lambda m: f"<!-- depth-card:start -->\n{generate('depth-card')}<!-- depth-card:end -->", new)
        new = MODEL_CARD.sub(lambda m: f"{CARD_START}\n{generate('model-card')}{CARD_END}", new)
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed


def main() -> None:
    if "--pages" in sys.argv[1:]:
        paths = [Path(a).resolve() for a in sys.argv[sys.argv.index("--pages") + 1:]] or pages()
        problems = strict(paths)
        print("\n".join(problems) or f"no figure in the free prose of {len(paths)} page(s)")
        sys.exit(1 if problems else 0)
    if "--write" in sys.argv[1:]:
        for path in write():
            print(f"rewrote {path.relative_to(ROOT)}")
        return
    problems = check()
    print("\n".join(problems) or "every generated block is current and free prose holds no figure")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
