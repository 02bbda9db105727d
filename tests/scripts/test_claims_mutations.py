"""The claims check can fail, and proves it: every generated claim, changed in a copy, is caught (a stale block), and
so is every figure added to free prose.

Each mutation changes one claim inside a generated block of ``PAGES``: a number (its last digit), an end of an
interval, a direction word (above ↔ below, ties with → above, reproduced ↔ not reproduced, better ↔ worse, met ↔
not met) or a count (an integer or number word before a counted noun, plus one: ``20 bundled checkpoints`` → 21,
``five settings`` → six). The mutated copy must fail ``prose_claims.check_page``. Every candidate runs (the
generators' output is computed once and cached); beyond ``SAMPLE`` candidates a fixed-seed sample of ``SAMPLE``
would. A hand-written figure added to free prose must be caught as well, an integer with a unit (``2,156 s``,
``868 passed``), a count (``about five minutes``) and a claim over seeds (``in every seed``) among them.
"""

import functools
import random
import re

import pytest

from tests.scripts.test_prose_claims import claims

PAGES = ("README.md", "docs/results.md", "docs/comparisons.md", "docs/speed.md")
SAMPLE, SEED = 2000, 27
NUMBER = re.compile(r"(?<![\w.])[+-]?\d+\.\d+(?!\d)")
INTERVAL_END = re.compile(r"(?<=\[)[+-]?\d+\.\d+(?=, )|(?<=, )[+-]?\d+\.\d+(?=\])")
DIRECTIONS = {"above": "below", "below": "above", "ties with": "above", "not reproduced": "reproduced",
              "reproduced": "not reproduced", "better": "worse", "worse": "better", "tie": "above",
              "not met": "met", "met": "not met", "tied": "better",
              "significant before correction, not after, against": "above"}  # fmt: skip
DIRECTION = re.compile(r"\b(?:significant before correction, not after, against|not reproduced|ties with|above|below"
                       r"|reproduced|better|worse|tied|tie|not met|met)\b")


def _bump(number: str) -> str:
    """The last digit changed: 0.731 -> 0.732, 0.739 -> 0.738."""
    return number[:-1] + ("8" if number[-1] == "9" else str(int(number[-1]) + 1))


WORDS = ["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven"]
#: a count in a generated block: a number before up to one word and a counted noun (``20 bundled checkpoints``)
COUNT = re.compile(rf"(?<![\w.,-])(?P<number>\d{{1,3}}(?:,\d{{3}})+|\d+|{'|'.join(WORDS)})(?= (?:[a-z-]+ )?"
                   r"(?:checkpoints|settings|heads|seeds|families|pages|comparisons|runs)\b)")  # fmt: skip


def _count_bump(number: str) -> str:
    """A count plus one, written as it was: 16 -> 17, 1,000 -> 1,001, four -> five."""
    if number in WORDS:
        return WORDS[WORDS.index(number) + 1]
    n = int(number.replace(",", "")) + 1
    return f"{n:,}" if "," in number else str(n)


def mutations(text: str) -> list[tuple[str, int, int, str]]:
    """``(kind, start, end, replacement)`` for every claim inside the generated blocks of ``text``."""
    out = []
    for block in claims.BLOCK.finditer(text):
        body, offset = block.group("body"), block.start("body")
        ends = {m.start() for m in INTERVAL_END.finditer(body)}
        for m in NUMBER.finditer(body):
            kind = "interval end" if m.start() in ends else "number"
            out.append((kind, offset + m.start(), offset + m.end(), _bump(m.group())))
        for m in DIRECTION.finditer(body):
            out.append(("direction word", offset + m.start(), offset + m.end(), DIRECTIONS[m.group()]))
        for m in COUNT.finditer(body):
            start, end = offset + m.start("number"), offset + m.end("number")
            out.append(("generated count", start, end, _count_bump(m.group("number"))))
    return out


@pytest.fixture(scope="module")
def cached_generators():
    original = claims.generate
    claims.generate = functools.cache(original)
    yield
    claims.generate = original


@pytest.mark.parametrize("page", PAGES)
def test_the_unmutated_page_passes(page, cached_generators):
    assert claims.check_page(claims.ROOT / page) == []


def test_every_mutation_of_a_generated_claim_is_caught(tmp_path, cached_generators):
    candidates = [(page, *m) for page in PAGES for m in mutations((claims.ROOT / page).read_text())]
    kinds = {kind for _, kind, *_ in candidates}
    assert kinds == {"number", "interval end", "direction word", "generated count"}, kinds
    sample = random.Random(SEED).sample(candidates, min(SAMPLE, len(candidates)))
    survivors = []
    for page, kind, start, end, replacement in sample:
        text = (claims.ROOT / page).read_text()
        copy = tmp_path / page.replace("/", "-")
        copy.write_text(text[:start] + replacement + text[end:])
        if not claims.check_page(copy):
            survivors.append(f"{page}: {kind} {text[start:end]!r} -> {replacement!r}")
    caught = len(sample) - len(survivors)
    sampled = f" (a seed-{SEED} sample of {len(candidates)})" if len(sample) < len(candidates) else ""
    by_kind = {k: sum(kind == k for _, kind, *_ in sample) for k in sorted(kinds)}
    print(f"{caught} of {len(sample)} mutations caught{sampled}; by kind: {by_kind}")
    assert not survivors, "\n".join(survivors)


@pytest.mark.parametrize("claim", ["LAYA beats Concat here.", "The gap is 0.031.", "It saves 12 % of the time.",
                                   "α is 2× as faithful.", "The CI is [0.1, 0.3].", "Both are within the noise.",
                                   "The gap is `0.031`.", "The suite took 2,156 s.", "It ends with 868 passed.",
                                   "A wheel of about 6 MB.", "It waited `300 s`.", "It ships 18 trained checkpoints.",
                                   "It covers four settings.", "The tutorial takes about two minutes.",
                                   "Its α sits on the last block in two of three seeds.", "Its α sits there in every seed.",
                                   "The dashboard has eight pages.", "A 5-block CNN.", "It was tested on 20 test images.",
                                   "It fine-tunes for six epochs.", "Its spread is ± 0.004."])
def test_a_hand_written_claim_in_free_prose_is_caught(claim, tmp_path, cached_generators):
    text = (claims.ROOT / "docs/results.md").read_text()
    heading = text.index("\n## ")
    copy = tmp_path / "results.md"
    copy.write_text(text[:heading] + "\n\n" + claim + "\n" + text[heading:])
    problems = claims.check_page(copy)
    assert problems and all("in free prose" in p and claim in p for p in problems), problems


def _other_count(match: re.Match) -> str:
    """The matched count changed: a number two higher, a number word one higher."""
    words = ["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    count = match.group(1)
    other = str(int(count) + 2) if count.isdigit() else words[(words.index(count) + 1) % len(words)]
    return match.group(0).replace(count, other)


@pytest.mark.parametrize("page, before, after", [
    ("README.md", r"It ships (\d+) bundled checkpoints", _other_count),
    ("README.md", r": ([a-z]+) settings of", _other_count),
    ("docs/tutorial.md", "to the dashboard in minutes on a busy CPU", "to the dashboard in about two minutes on a busy CPU"),
    ("docs/results.md", "`python -m laya reproduce cifar10-cnn`.\n", "`python -m laya reproduce cifar10-cnn`. Its α is on the last block in two of three seeds.\n"),
])  # fmt: skip
def test_the_four_hand_mutations_that_passed_before_are_caught(page, before, after, tmp_path, cached_generators):
    """Each mutation (a literal, or a pattern whose count is changed, whatever models/ ships now) is caught."""
    text = (claims.ROOT / page).read_text()
    if callable(after):
        assert len(re.findall(before, text)) == 1, before
        mutated = re.sub(before, after, text)
    else:
        assert text.count(before) == 1, before
        mutated = text.replace(before, after)
    assert mutated != text
    copy = tmp_path / page.replace("/", "-")
    copy.write_text(mutated)
    assert claims.check_page(copy)
