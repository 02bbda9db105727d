"""The prose quotes the reports: generated blocks and checked numbers (issue 18 §5).

    python scripts/prose_claims.py            # check: list every stale block and unsourced number, exit 1 if any
    python scripts/prose_claims.py --write    # regenerate every generated block in place

What is checked, in README.md and docs/*.md:

* **Generated blocks** ``<!-- generated: NAME [ARG] -->`` ... ``<!-- /generated -->`` (and the depth card's
  ``<!-- depth-card:start -->`` ... ``<!-- depth-card:end -->``) must equal what ``GENERATORS[NAME](ARG)``
  prints from the committed files now.
* **Quoted numbers** in the free prose of the sections in ``SECTIONS`` (outside generated blocks, code spans and
  links): every interval ``x [a, b]`` (also ``m ± s [a, b]``) must be an interval of a source file at the precision
  written, and every other decimal number must occur in a source file at that precision. The sources are the
  files a section quotes (``SECTIONS``; ``git:REV:PATH`` is a file as committed at ``REV``).
* **Differences and ties**: a signed difference with its CI, ``+0.031 [+0.023, +0.038]``, is stated as a tie
  (the words *tie*/*ties*/*tied* in its clause) exactly when its CI covers 0.

The number check is a provenance check: it proves that a number exists in the files, at the precision written,
not that the sentence names the right one; intervals (three numbers together) pin the quantity far better than
single numbers, and tables and ranges are generated blocks.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # `python scripts/...` from a checkout
sys.path.insert(0, str(ROOT / "scripts"))

NUMBER = r"[+−-]?\d[\d,]*(?:\.\d+)?"
INTERVAL = re.compile(rf"(?<![\w.])({NUMBER})(?: ± \d+(?:\.\d+)?)? \[({NUMBER}), ({NUMBER})\]")
DECIMAL = re.compile(r"(?<![\w.\d])[+−-]?\d+\.\d+(?![\d])")
BLOCK = re.compile(r"<!-- generated: (?P<spec>[^>]*?) -->\n(?P<body>.*?)<!-- /generated -->", re.S)
DEPTH_CARD = re.compile(r"<!-- depth-card:start -->\n(?P<body>.*?)<!-- depth-card:end -->", re.S)
TIE = re.compile(r"\bti(?:e|es|ed)\b", re.I)
PERCENT = re.compile(r"(?<![\w.\d])[+−-]?(\d+(?:\.\d+)?) ?%(?!\w)")
STRUCTURAL_PERCENTS = {"95", "50", "100"}  # confidence levels, "≈ 50 % Shallow-Deep Networks report", "100 %"


def _value(text: str) -> float:
    return float(text.replace("−", "-").replace(",", "").replace("+", ""))


def _decimals(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


# --- generators ----------------------------------------------------------------------------------------------


def _settings() -> list[Path]:
    return sorted(p for p in (ROOT / "models").iterdir() if p.is_dir())


def _checkpoints(file: str) -> list[Path]:
    return sorted(p.parent for p in (ROOT / "models").glob(f"*/*/{file}"))


def _summary_table(arg: str) -> str:
    from readme_tables import readme_table

    return readme_table(ROOT / arg) + "\n"


def _depth_card(arg: str) -> str:
    from laya.analysis.depth import depth_card

    return depth_card(_checkpoints("depth.json"))


def _measured(card: str) -> Callable[[str], str]:
    def generate(arg: str) -> str:
        import laya.analysis.measured as measured

        return getattr(measured, card)(_checkpoints("exits.json"))

    return generate


def _depth_facts(arg: str) -> str:
    from depth_facts import depth_facts

    return depth_facts(ROOT / "models")


def _depth_inputs(arg: str) -> str:
    from depth_facts import depth_inputs

    return depth_inputs(ROOT / "models")


def _spatial_maps(arg: str) -> str:
    """The tables of ``python benchmarks/spatial_maps.py`` from its CSVs in folder ``arg``."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from spatial_maps import markdown_tables

    return markdown_tables(ROOT / arg)


def _page_costs(arg: str) -> str:
    """The tables of ``python benchmarks/page_costs.py --out`` (and ``load_test.py --out``) in folder ``arg``."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from page_costs import markdown_tables as page_tables

    return page_tables(ROOT / arg)


ROUTES = {"cpu": "CPU (CPU torch first)", "gpu": "GPU (`pip install .`)"}  # install_size.sh's routes, in order


def _installs(folder: str) -> list[dict]:
    """The measurements ``bash scripts/install_size.sh ROUTE`` wrote to ``folder/ROUTE.json``, CPU first."""
    return [json.loads((ROOT / folder / f"{route}.json").read_text()) for route in ROUTES]


def _size(record: dict) -> str:
    return f"{record['bytes'] / 1e9:.1f} GB"


def _install_table(arg: str) -> str:
    """docs/installing.md's table of ``bash scripts/install_size.sh cpu|gpu`` runs (docs/install/*.json)."""
    installs = _installs(arg)
    rows = [
        f"| {ROUTES[r['route']]} | {r['seconds']} s | {_size(r)} | {r['torch']} | {r['torchvision']}{' (does not import)' if r['torchvision_error'] else ''} | "
        f"{r['cuda_packages']} | {r['load_before']:.1f} → {r['load_after']:.1f} |"
        for r in installs
    ]
    local = [f"`TORCH_CPU=\"{' '.join(r['torch_cpu_args'])}\"`" for r in installs if r["torch_cpu_args"]]
    return "\n".join(
        [
            "| route | time | size | torch | torchvision | CUDA packages (nvidia-*, triton) | load (1 min), start → end |",
            "|---|---|---|---|---|---|---|",
            *rows,
            "",
            f"One run each, by `bash scripts/install_size.sh cpu` and `bash scripts/install_size.sh gpu` from a "
            f"{installs[0]['source']}, on {installs[0]['cores']} CPU cores, pip's cache off"
            + (f"; the CPU index's wheels replaced by {', '.join(local)}." if local else "."),
        ]
    ) + "\n"


def _install_summary(arg: str) -> str:
    """The README's one line: each route's measured time and size (docs/install/*.json)."""
    installs = _installs(arg)
    parts = [f"{r['route'].upper()} {r['seconds']} s and {_size(r)}" for r in installs]
    loads = [x for r in installs for x in (r["load_before"], r["load_after"])]
    return (f"Measured here into a fresh virtualenv by `bash scripts/install_size.sh cpu|gpu`: {', '.join(parts)}, "
            f"on {installs[0]['cores']} shared cores (load {min(loads):.0f}–{max(loads):.0f}) "
            "from a local PyPI mirror.\n")  # fmt: skip


GENERATORS: dict[str, Callable[[str], str]] = {
    "depth-inputs": _depth_inputs,
    "summary-table": _summary_table,
    "depth-card": _depth_card,
    "exit-card": _measured("exit_card"),
    "exit-curves": _measured("exit_curves_card"),
    "truncation-card": _measured("truncation_card"),
    "alpha-card": _measured("alpha_card"),
    "depth-facts": _depth_facts,
    "spatial-maps": _spatial_maps,
    "page-costs": _page_costs,
    "install-table": _install_table,
    "install-summary": _install_summary,
}


def generate(spec: str) -> str:
    name, _, arg = spec.strip().partition(" ")
    if name not in GENERATORS:
        raise ValueError(f"unknown generated block {name!r}; expected one of {sorted(GENERATORS)}")
    return GENERATORS[name](arg.strip())


# --- documents and sections ----------------------------------------------------------------------------------


def documents() -> list[Path]:
    """The docs pages, then README.md (a section is looked up in this order)."""
    return [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]


#: section heading -> the files its prose quotes (globs relative to the repository, or git:REV:PATH)
SECTIONS: dict[str, list[str]] = {
    "Results": ["models/*/summary.csv", "models/*/summary.md", "models/*/comparisons.csv", "models/*/*/comparisons.csv",
                "models/*/*/faithfulness.csv", "models/*/*/report.json", "readme_tables:models/*",
                "seed0_sensitivity:models/*", "git:b1b4c12:models/fashion-mnist-mlp/summary.md",
                "git:afa2ab3:models/cifar10-efficientnet-lite0/summary.md"],  # fmt: skip
    "Depth analytics": ["models/*/*/depth.json", "models/*/*/exits.json"],
    "Speed": ["docs/benchmark-run.txt", "docs/speed/*.json"],
    "Measured against the anchors": ["docs/spatial_maps/*.csv"],
}


def section(heading: str) -> tuple[Path, str] | None:
    """The first document (docs pages first) with a ``#``/``##``/``###`` heading ``heading``, and the text up to
    the next heading of the same or a higher level."""
    for path in documents():
        text = path.read_text()
        match = re.search(rf"^(#{{1,3}}) {re.escape(heading)}\s*$", text, re.M)
        if match:
            level = len(match.group(1))
            end = re.search(rf"^#{{1,{level}}} ", text[match.end():], re.M)
            return path, text[match.end(): match.end() + end.start() if end else None]
    return None


def prose(text: str) -> str:
    """``text`` without generated blocks, the depth card, code, links' targets and HTML comments."""
    text = BLOCK.sub("", text)
    text = DEPTH_CARD.sub("", text)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`]*`", "", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return re.sub(r"<!--.*?-->", "", text, flags=re.S)


# --- sources -------------------------------------------------------------------------------------------------


@dataclass
class Sources:
    """Every number and every ``(estimate, low, high)`` interval found in a section's source files."""

    numbers: list[float]
    intervals: list[tuple[float, float, float]]

    def has_number(self, text: str) -> bool:
        x, half = abs(_value(text)), 0.5 * 10 ** -_decimals(text) + 1e-12
        i = bisect_left(self.numbers, x - half)
        return i < len(self.numbers) and self.numbers[i] <= x + half

    def has_interval(self, estimate: str, low: str, high: str) -> bool:
        want = [(_value(t), 0.5 * 10 ** -_decimals(t) + 1e-12) for t in (estimate, low, high)]
        i = bisect_left(self.intervals, (want[0][0] - want[0][1], -float("inf"), -float("inf")))
        for interval in self.intervals[i:]:
            if interval[0] > want[0][0] + want[0][1]:
                return False
            if all(abs(v - w) <= h for v, (w, h) in zip(interval, want)):
                return True
        return False


def _texts(pattern: str) -> Iterable[tuple[str, str]]:
    if pattern.startswith("git:"):
        _, rev, path = pattern.split(":", 2)
        yield path, subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"], capture_output=True, text=True,
                                   check=True).stdout  # fmt: skip
    elif pattern.startswith("seed0_sensitivity:"):  # a script's printout: ``python scripts/seed0_sensitivity.py``
        for setting in sorted(ROOT.glob(pattern.split(":", 1)[1])):
            if (setting / "results.csv").is_file():
                yield str(setting), subprocess.run([sys.executable, str(ROOT / "scripts" / "seed0_sensitivity.py"),
                                                    str(setting)], capture_output=True, text=True, check=True).stdout  # fmt: skip
    elif pattern.startswith("readme_tables:"):
        import readme_tables

        for setting in sorted(ROOT.glob(pattern.split(":", 1)[1])):
            if all((setting / name).is_file() for name in readme_tables.SETTING_FILES):
                yield str(setting), "\n".join([readme_tables.readme_table(setting), readme_tables.comparisons(setting),
                                               readme_tables.depth_across_seeds(setting),
                                               readme_tables.paper_definition(setting)])  # fmt: skip
    else:
        for path in sorted(ROOT.glob(pattern)):
            yield str(path), path.read_text()


def _json_intervals(data, out: list) -> None:
    if isinstance(data, dict):
        if all(isinstance(data.get(k), (int, float)) for k in ("estimate", "low", "high")):
            out.append((data["estimate"], data["low"], data["high"]))
        for key, value in data.items():
            if isinstance(value, (int, float)) and isinstance(data.get(f"{key}_low"), (int, float)):
                out.append((value, data[f"{key}_low"], data.get(f"{key}_high")))
            _json_intervals(value, out)
    elif isinstance(data, list):
        for value in data:
            _json_intervals(value, out)


def sources(patterns: list[str]) -> Sources:
    numbers, intervals = set(), []
    for name, text in (item for pattern in patterns for item in _texts(pattern)):
        numbers.update(abs(_value(m.group())) for m in re.finditer(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?", text))
        intervals += [tuple(_value(g) for g in m.groups()) for m in INTERVAL.finditer(text)]
        if name.endswith(".json"):
            _json_intervals(json.loads(text), intervals)
        elif name.endswith(".csv") and text.strip():
            import io

            import pandas as pd

            frame = pd.read_csv(io.StringIO(text))
            for column in frame.columns:
                if f"{column}_low" in frame.columns and f"{column}_high" in frame.columns:
                    part = frame[[column, f"{column}_low", f"{column}_high"]].apply(pd.to_numeric, errors="coerce")
                    intervals += [tuple(r) for r in part.dropna().values]
            if {"mean", "low", "high"} <= set(frame.columns):  # a mean with its CI (benchmarks/spatial_maps.py)
                part = frame[["mean", "low", "high"]].apply(pd.to_numeric, errors="coerce")
                intervals += [tuple(r) for r in part.dropna().values]
    intervals = [i for i in intervals if None not in i]
    return Sources(sorted(numbers), sorted(intervals))


# --- checks --------------------------------------------------------------------------------------------------


def stale_blocks() -> list[str]:
    """``"path: NAME ARG"`` for every generated block whose text is not what its generator prints now."""
    stale = []
    for path in documents():
        text = path.read_text()
        for match in BLOCK.finditer(text):
            if match.group("body") != generate(match.group("spec")):
                stale.append(f"{path.relative_to(ROOT)}: generated block '{match.group('spec')}' is stale")
        for match in DEPTH_CARD.finditer(text):
            if match.group("body") != generate("depth-card"):
                stale.append(f"{path.relative_to(ROOT)}: the depth card is stale (scripts/depth_all.sh)")
    return stale


def _sentence(text: str, start: int) -> tuple[int, int]:
    """Bounds of the sentence around ``start``: a table row, or back to the previous sentence end or paragraph."""
    line_start = text.rfind("\n", 0, start) + 1
    if text.startswith("|", line_start):
        end = text.find("\n", start)
        return line_start, end if end >= 0 else len(text)
    begin = max(text.rfind(". ", 0, start) + 1, text.rfind("\n\n", 0, start) + 1, text.rfind(".\n", 0, start) + 1)
    ends = [e for e in (text.find(". ", start), text.find("\n\n", start), text.find(".\n", start)) if e >= 0]
    return begin, min(ends) if ends else len(text)


def tie_wording(text: str, where: str) -> list[str]:
    """A signed difference whose CI covers 0 needs *tie* in its sentence; one whose CI excludes 0 must not be
    called a tie in its own stretch of the sentence (since the previous interval), unless negated (*not*)."""
    problems, previous_end = [], 0
    for match in INTERVAL.finditer(text):
        estimate, low, high = match.groups()
        begin, end = _sentence(text, match.start())
        if estimate[0] not in "+−-" or "." not in estimate:  # not a difference
            previous_end = match.end()
            continue
        covers = _value(low) <= 0 <= _value(high)
        sentence = text[begin:end]
        local = text[max(begin, previous_end): match.end()]
        if covers and not TIE.search(sentence):
            problems.append(f"{where}: '{match.group()}' covers 0 but its sentence does not call it a tie: "
                            f"'{' '.join(sentence.split())}'")  # fmt: skip
        if not covers and TIE.search(local) and not re.search(r"\bnot\b", local):
            problems.append(f"{where}: '{match.group()}' excludes 0 but is called a tie: '{' '.join(local.split())}'")
        previous_end = match.end()
    return problems


def unsourced(heading: str, patterns: list[str]) -> list[str]:
    """Numbers and intervals of section ``heading`` not found in its sources; differences worded against their CI."""
    found = section(heading)
    if found is None:
        return [f"no section '{heading}' in README.md or docs/*.md (moved? update SECTIONS)"]
    path, text = found
    where = f"{path.relative_to(ROOT)} § {heading}"
    body, src, problems = prose(text), sources(patterns), []
    for match in INTERVAL.finditer(body):
        if not src.has_interval(*match.groups()):
            problems.append(f"{where}: interval '{match.group()}' is in none of {patterns}")
    problems += tie_wording(body, where)
    rest = INTERVAL.sub(" ", body)
    for match in PERCENT.finditer(rest):
        number = match.group(1)
        if number in STRUCTURAL_PERCENTS:
            continue
        as_fraction = f"{_value(number) / 100:.{_decimals(number) + 2}f}"
        if not (src.has_number(as_fraction) or src.has_number(number)):
            context = rest[max(0, match.start() - 40): match.end() + 20].replace("\n", " ")
            problems.append(f"{where}: {match.group()} is in none of {patterns} (… {context} …)")
    rest = PERCENT.sub(" ", rest)
    for match in DECIMAL.finditer(rest):
        if not src.has_number(match.group()):
            context = rest[max(0, match.start() - 40): match.end() + 20].replace("\n", " ")
            problems.append(f"{where}: {match.group()} is in none of {patterns} (… {context} …)")
    return problems


def check() -> list[str]:
    problems = stale_blocks()
    for heading, patterns in SECTIONS.items():
        problems += unsourced(heading, patterns)
    return problems


def write() -> list[Path]:
    """Regenerate every generated block (and the depth card) in place; the files changed."""
    changed = []
    for path in documents():
        text = path.read_text()
        new = BLOCK.sub(lambda m: f"<!-- generated: {m.group('spec')} -->\n{generate(m.group('spec'))}<!-- /generated -->", text)
        new = DEPTH_CARD.sub(lambda m: f"<!-- depth-card:start -->\n{generate('depth-card')}<!-- depth-card:end -->", new)
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed


def main() -> None:
    if "--write" in sys.argv[1:]:
        for path in write():
            print(f"rewrote {path.relative_to(ROOT)}")
        return
    problems = check()
    print("\n".join(problems) or "every generated block is current and every quoted number is in its sources")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
