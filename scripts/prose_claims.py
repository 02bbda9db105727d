"""The prose quotes the reports: claims are generated blocks, and free prose states none.

    python scripts/prose_claims.py            # check: list every stale block, claim in free prose and unsourced number
    python scripts/prose_claims.py --write    # regenerate every generated block in place
    python scripts/prose_claims.py --pages docs/x.md [...]   # the strict check alone, on these pages (all without)

**Strict check** (``strict``): in README.md, the model card (models/README.md) and every docs page (the generated
API reference aside), a *claim* in free prose is an error, printed ``file:line: 'claim' in free prose: line``.
Free prose is what ``masked`` leaves:
not generated blocks, code blocks and spans, link targets, URLs, HTML comments and tags. A claim (``CLAIM``) is a
decimal number, a percentage, a ratio (``3×``, ``1.5x``), an interval ``[a, b]``, an integer with a unit of time,
size or test outcome (``UNIT``: ``28 min``, ``2,156 s``, ``6 MB``, ``4 CPU-s``, ``868 passed``, ``790 tests``) or a
verdict word (beat(s), lose(s)/lost, tie(s)/tied, win(s), save(s)/saving(s), faster, slower, outperform(s), within the
noise); other integers are configuration. A setting with a unit is written as code naming it (``--timeout 300``,
``LAYA_WORKER_TIMEOUT=120``, ``MAX_BYTES = 20_000_000``); a figure alone in a code span (``300 s``) is still prose.
``ALLOWED`` lists the few structural constants a page may write, each with its reason.
Pages in ``NOT_YET_STRICT`` are still being converted and leave that set when they pass.

**Writing a claim**: put it in a generated block whose generator prints it from the result files (a new generator
is one function ``(arg: str) -> str`` and one line in ``GENERATORS``); direction words come from
``laya.analysis.statistics`` (``paired_verdict``, ``holm_verdict``, ``saving_verdict``), never from the author.

What else is checked:

What is checked, in those pages (``pages``):

* **Generated blocks** ``<!-- generated: NAME [ARG] -->`` ... ``<!-- /generated -->`` (and the depth card's
  ``<!-- depth-card:start -->`` ... ``<!-- depth-card:end -->``, and the model card's table between
  ``<!-- model-card:start -->`` and ``<!-- model-card:end -->``, from every bundled ``report.json``) must equal
  what ``GENERATORS[NAME](ARG)`` prints from the committed files now.
* **Quoted numbers** in the free prose of the sections in ``SECTIONS`` (outside generated blocks, code spans and
  links): every interval ``x [a, b]`` (also ``m ± s [a, b]``) must be an interval of a source file at the precision
  written, and every other decimal number must occur in a source file at that precision. The sources are the
  files a section quotes (``SECTIONS``: the sections of pages not yet strict).
* **Differences and ties**: a signed difference with its CI, ``+0.031 [+0.023, +0.038]``, is stated as a tie
  (the words *tie*/*ties*/*tied* in its clause) exactly when its CI covers 0.

The number check is a provenance check: it proves that a number exists in the files, at the precision written,
not that the sentence names the right one; intervals (three numbers together) pin the quantity far better than
single numbers, and tables and ranges are generated blocks.
"""

from __future__ import annotations

import json
import re
import sys
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # `python scripts/...` from a checkout
sys.path.insert(0, str(ROOT / "scripts"))

from laya.training.bundle import CARD_END, CARD_START  # noqa: E402  (the model card's markers)

NUMBER = r"[+−-]?\d[\d,]*(?:\.\d+)?"
INTERVAL = re.compile(rf"(?<![\w.])({NUMBER})(?: ± \d+(?:\.\d+)?)? \[({NUMBER}), ({NUMBER})\]")
DECIMAL = re.compile(r"(?<![\w.\d])[+−-]?\d+\.\d+(?![\d])")
BLOCK = re.compile(r"<!-- generated: (?P<spec>[^>]*?) -->\n(?P<body>.*?)<!-- /generated -->", re.S)
DEPTH_CARD = re.compile(r"<!-- depth-card:start -->\n(?P<body>.*?)<!-- depth-card:end -->", re.S)
#: the model card's table in models/README.md, between the markers ``laya.training.bundle.update_model_card`` writes
MODEL_CARD = re.compile(rf"{re.escape(CARD_START)}\n(?P<body>.*?){re.escape(CARD_END)}", re.S)
OVERVIEW = re.compile(r"<!-- results-overview:start -->\n.*?<!-- results-overview:end -->", re.S)  # tests/docs/test_readme.py
#: the tutorial's measured times and accuracies, written from its own run by ``python scripts/tutorial.py --write``
TUTORIAL_TIMES = re.compile(r"<!-- tutorial-times:start -->\n.*?<!-- tutorial-times:end -->", re.S)
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


def _depth_card(arg: str) -> str:
    from depth_cards import depth_card

    return depth_card(_checkpoints("depth.json"))


def _model_card(arg: str) -> str:
    from laya.training.bundle import model_card

    return model_card(ROOT / "models")


def _measured(card: str) -> Callable[[str], str]:
    def generate(arg: str) -> str:
        import depth_cards

        return getattr(depth_cards, card)(_checkpoints("exits.json"))

    return generate


def _wrapped(text: str, width: int = 120) -> str:
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


def _depth_facts(arg: str) -> str:
    """The bullets of ``python scripts/depth_facts.py models ARG`` (ARG: topics, e.g. ``detection``; none: all)."""
    from depth_facts import depth_facts

    return _wrapped(depth_facts(ROOT / "models", arg)) if arg else depth_facts(ROOT / "models")


def _depth_table(arg: str) -> str:
    """One table of the depth card (``depth_cards.DEPTH_TABLES[arg]``) over the bundled ``depth.json``."""
    from depth_cards import DEPTH_TABLES

    return _wrapped(DEPTH_TABLES[arg](_checkpoints("depth.json")))


def _spatial_facts(arg: str) -> str:
    """``spatial-facts TOPIC [CHECKPOINT-GLOB]``: ``scripts/spatial_facts.py``'s sentences from the pixel benchmark's
    CSVs in ``docs/spatial_maps`` (empty where no CSV matches)."""
    from spatial_facts import spatial_facts

    topic, _, pattern = arg.partition(" ")
    return _wrapped(spatial_facts(ROOT / "docs" / "spatial_maps", topic, pattern.strip()))


def _lens_facts(arg: str) -> str:
    """``lens-facts SETTING``: the lens of SETTING's LAYA (its own classifier) and Concat (fitted probes) heads, from
    their ``lens.csv`` (``python -m laya lens``): the early blocks' range, the last block, Concat's first and last."""
    import pandas as pd

    def table(head: str) -> pd.DataFrame:
        frame = pd.read_csv(ROOT / "models" / arg / head / "lens.csv")
        return frame[frame["class"] == "all"].set_index("layer_index")

    laya, concat = table("laya"), table("concat")
    early, last = laya.iloc[:-1], laya.iloc[-1]
    first, deep = concat.iloc[0], concat.iloc[-1]
    return _wrapped(f"On the bundled `{arg}` ({int(last['n']):,} test inputs), LAYA's own classifier reads "
            f"{early['layer'].iloc[0]} to {early['layer'].iloc[-1]} with probability of the final class "
            f"{early['prob'].min():.3f} to {early['prob'].max():.3f}, KL to the final prediction "
            f"{early['kl'].min():.2f} to {early['kl'].max():.2f} nats, and {last['layer']} as the final prediction "
            f"(KL {last['kl']:.3f}). Concat's fitted probes read every block, their KL going from "
            f"{first['kl']:.2f} [{first['kl_low']:.2f}, {first['kl_high']:.2f}] at {first['layer']} to "
            f"{deep['kl']:.2f} [{deep['kl_low']:.2f}, {deep['kl_high']:.2f}] at {deep['layer']}.\n")


def _alpha_share(arg: str) -> str:
    """``alpha-share SETTING/HEAD``: the mean layer weight α per layer over the test set (``layer_profile.csv``)."""
    import pandas as pd

    frame = pd.read_csv(ROOT / "models" / arg / "layer_profile.csv")
    frame = frame[frame["method"] == "laya_alpha"]
    cells = ", ".join(f"{r.layer} {r.mean:.2g}" for r in frame.itertuples())
    return _wrapped(f"Mean α over the `{arg}` test inputs (`layer_profile.csv`): {cells}.\n")


def _depth_inputs(arg: str) -> str:
    from depth_facts import depth_inputs

    return _wrapped(depth_inputs(ROOT / "models"))


def _spatial_maps(arg: str) -> str:
    """The tables of ``python benchmarks/spatial_maps.py`` from its CSVs in folder ``arg``."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from spatial_maps import markdown_tables

    return _wrapped(markdown_tables(ROOT / arg))


def _map_sanity(arg: str) -> str:
    """The tables of ``python benchmarks/map_sanity.py`` (the cascading randomisation test) from its CSVs in ``arg``."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from map_sanity import markdown

    return _wrapped(markdown(ROOT / arg))


def _backbone_breadth(arg: str) -> str:
    """``backbone-breadth FILE [summary]``: the table of ``python scripts/backbone_breadth.py --out`` from its JSON
    result file (``summary``: the verdict line alone)."""
    from backbone_breadth import markdown, summary

    arg, _, part = arg.partition(" ")
    return summary(ROOT / arg) if part == "summary" else markdown(ROOT / arg)


def _attach_breadth(arg: str) -> str:
    """``attach-breadth FILE [summary]``: the table of ``python scripts/attach_breadth.py`` from its JSON result file
    (``summary``: the verdict line alone)."""
    from attach_breadth import markdown, summary

    arg, _, part = arg.partition(" ")
    return summary(ROOT / arg) if part == "summary" else _wrapped(markdown(ROOT / arg))


def _own_networks(arg: str) -> str:
    """``own-networks DIR``: the checks of ``python scripts/own_networks.py`` (``DIR/*.json``), a row per network."""
    from own_networks import markdown

    return _wrapped(markdown(ROOT / arg))


def _own_agreement(arg: str) -> str:
    """``own-agreement NAME``: network NAME's cheap-score agreement table (``docs/own-networks/NAME.json``)."""
    from own_networks import agreement_markdown

    return agreement_markdown(arg)


def _page_costs(arg: str) -> str:
    """The tables of ``python benchmarks/page_costs.py --out`` (and ``load_test.py --out``) in folder ``arg``."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from page_costs import markdown_tables as page_tables

    return page_tables(ROOT / arg)


def _raw_runs(path: Path) -> list[tuple[str, list[dict]]]:
    """``(command line, its JSON records)`` of every run in a raw benchmark log such as ``docs/sandbox-benchmarks.txt``:
    a ``python benchmarks/...`` line, then one JSON object per line or one indented object."""
    runs: list[tuple[str, list[dict]]] = []
    chunk: list[str] = []

    def flush() -> None:
        text = "\n".join(chunk).strip()
        if runs and text:
            runs[-1][1].extend([json.loads(text)] if text.startswith("{\n") else [json.loads(x) for x in text.splitlines()])
        chunk.clear()

    for line in path.read_text().splitlines():
        if line.startswith("python benchmarks/"):
            flush()
            runs.append((line, []))
        elif not line.startswith("#"):
            chunk.append(line)
    flush()
    return runs


def _worker_overhead(arg: str) -> str:
    """``worker-overhead FILE [verdict]``: the verdict and table of ``python benchmarks/worker_overhead.py`` in raw log
    FILE (``verdict``: the verdict line alone)."""
    arg, _, part = arg.partition(" ")
    (records,) = [r for command, r in _raw_runs(ROOT / arg) if "worker_overhead.py" in command]
    rows, total = [r for r in records if "setting" in r], next(r for r in records if "max_added_ms" in r)
    lines = [f"**Verdict:** a sandboxed worker adds at most {total['max_added_ms']:.1f} ms to an interaction (goal: at "
             f"most {total['goal_ms']} ms: {'met' if total['max_added_ms'] <= total['goal_ms'] else 'not met'}); a "
             f"worker's start-up took {total['worker_startup_s']:.1f} s (fastest of {total['rounds']}, "
             f"{total['threads']} thread, `{arg}`).", "",
             "| setting | Inspect in process / worker (ms) | added | Depth analytics in process / worker (ms) | added "
             "| first load in process / in worker (s) |", "|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        lines.append(f"| {r['setting']} | {r['explain_in_process_ms']:.1f} / {r['explain_worker_ms']:.1f} | "
                     f"{r['explain_added_ms']:+.1f} | {r['depth_in_process_ms']:.1f} / {r['depth_worker_ms']:.1f} | "
                     f"{r['depth_added_ms']:+.1f} | {r['load_in_process_s']:.3f} / {r['first_load_in_worker_s']:.3f} |")
    return _wrapped(lines[0] + "\n" if part == "verdict" else "\n".join(lines) + "\n")


def _upload_memory(arg: str) -> str:
    """``upload-memory FILE``: the server's RSS in every ``python benchmarks/upload_memory.py`` run of raw log FILE."""
    runs = [(command.split("#", 1)[1].strip() if "#" in command else command, r[0])
            for command, r in _raw_runs(ROOT / arg) if "upload_memory.py" in command]  # fmt: skip
    keys = {"server_rss_start_mb": "start (one session on a bundled model)",
            "server_rss_after_uploads_mb": "after the uploads, each shown on Inspect", "server_peak_mb": "peak",
            "server_rss_when_clean_mb": "when the upload folders were empty and the workers ended",
            "seconds_until_clean": "seconds from closing the browsers until then",
            "server_rss_after_sessions_mb": "after the sessions (older runs)", "server_rss_end_mb": "end",
            "workers_rss_mb": "the worker holding the models"}  # fmt: skip
    lines = ["| server RSS (MB) | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " |",
             "|---|" + "---|" * len(runs)]
    for key, label in keys.items():
        if any(key in r for _, r in runs):
            lines.append(f"| {label} | " + " | ".join("–" if r.get(key) is None else f"{r[key]:g}" for _, r in runs) + " |")
    notes = "; ".join(f"run {i + 1}: {r['uploads']} uploads, {r['weights_mb_total']} MB of weights, {what}"
                      for i, (what, r) in enumerate(runs))  # fmt: skip
    return _wrapped("\n".join(lines) + f"\n\nRuns (`{arg}`): {notes}.\n")

from claims import CLAIMS  # noqa: E402  (the sentence and table generators, one file per topic)
from claims.counts import COUNTS as COUNTS_REGISTRY  # noqa: E402  (the counts prose may write, with their sources)
from laya.analysis.statistics import paired_verdict  # noqa: E402


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


#: what the strict check reads as a claim in hand-written prose, in the README's words (``claim-kinds``)
CLAIM_KINDS = ("decimal numbers", "percentages", "ratios", "intervals", "integers with a unit of time, size or test outcome",
               "verdict words")  # fmt: skip


def _claim_kinds(arg: str) -> str:
    """The kinds of claim the strict check finds in hand-written prose (``CLAIM_KINDS``, ``claims.counts``)."""
    from claims.counts import COUNTED

    nouns = ", ".join(n.replace("(?:y|ies)", "ies").rstrip("?") for n in COUNTED if n != "class")
    return (f"`python scripts/prose_claims.py` reports, in hand-written prose, {', '.join(CLAIM_KINDS)}, counts (an "
            f"integer or a number word before one of {nouns}) unless registered with their source, and quantifiers "
            f"over seeds, settings or checkpoints; figures in generated blocks must equal what their generator prints "
            f"now.\n")


GENERATORS: dict[str, Callable[[str], str]] = {
    **CLAIMS,
    "claim-kinds": _claim_kinds,
    "depth-inputs": _depth_inputs,
    "depth-card": _depth_card,
    "model-card": _model_card,
    "exit-card": _measured("exit_card"),
    "exit-curves": _measured("exit_curves_card"),
    "truncation-card": _measured("truncation_card"),
    "alpha-card": _measured("alpha_card"),
    "depth-facts": _depth_facts,
    "depth-table": _depth_table,
    "spatial-facts": _spatial_facts,
    "lens-facts": _lens_facts,
    "alpha-share": _alpha_share,
    "worker-overhead": _worker_overhead,
    "upload-memory": _upload_memory,
    "spatial-maps": _spatial_maps,
    "map-sanity": _map_sanity,
    "page-costs": _page_costs,
    "backbone-breadth": _backbone_breadth,
    "attach-breadth": _attach_breadth,
    "own-networks": _own_networks,
    "own-agreement": _own_agreement,
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
    """The docs pages, then README.md (a section is looked up in this order): :func:`pages`, README last."""
    return [*pages()[1:], ROOT / "README.md"]


#: section heading -> the files its prose quotes (globs relative to the repository); pages not yet strict
SECTIONS: dict[str, list[str]] = {
    "Depth analytics": ["models/*/*/depth.json", "models/*/*/exits.json"],
    "Error and OOD detection": ["models/*/*/depth.json"],
    "Early exit, measured": ["models/*/*/exits.json"],
    "Pruning and truncation": ["models/*/*/depth.json", "models/*/*/exits.json"],
    "Spatial maps against Grad-CAM, HiResCAM and LayerCAM": ["docs/spatial_maps/*.csv"],
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


def stale(path: Path) -> list[str]:
    """``"path: NAME ARG"`` for every generated block of ``path`` whose text is not what its generator prints now."""
    text, name = path.read_text(), path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    problems = [f"{name}: generated block '{m.group('spec')}' is stale" for m in BLOCK.finditer(text)
                if m.group("body") != generate(m.group("spec"))]  # fmt: skip
    problems += [f"{name}: the model card is stale (python scripts/prose_claims.py --write)"
                 for m in MODEL_CARD.finditer(text) if m.group("body") != generate("model-card")]  # fmt: skip
    return problems + [f"{name}: the depth card is stale (scripts/depth_all.sh)" for m in DEPTH_CARD.finditer(text)
                       if m.group("body") != generate("depth-card")]  # fmt: skip


def stale_blocks() -> list[str]:
    """:func:`stale` for every document."""
    return [problem for path in documents() for problem in stale(path)]


def check_page(path: Path) -> list[str]:
    """Everything wrong with one page: its stale generated blocks and the claims in its free prose."""
    return stale(path) + strict([path])


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
        covers = paired_verdict(_value(low), _value(high)) == "tie"
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


# --- the strict check: no claim in free prose --------------------------------------------------------------

#: an integer with a unit of time or size (2,156 s, 28 min, 6 MB, 4 CPU-s) or a test outcome (868 passed, 790 tests)
UNIT = (r"\d[\d,]* ?(?:ms|µs|s|min|minutes?|seconds?|hours?|h|[kKMGT]i?B|CPU-s)(?![\w-])"
        r"|\d[\d,]* (?:passed|failed|skipped|deselected|errors|tests)\b")

#: what counts as a claim in free prose: a decimal number, a percentage, a ratio, an interval, an integer with a unit,
#: or a verdict word
CLAIM = re.compile(
    r"(?<![\w.])[+−-]?\d+\.\d+(?![\d.]*\w)"  # a decimal number (0.73, −0.261), not a version (2.14.1)
    r"|(?<![\w.])\d+(?:\.\d+)? ?%"  # a percentage
    r"|(?<![\w.])\d+(?:\.\d+)? ?[×x](?![\w\d])"  # a ratio (3×, 1.5x), not a size (224x224)
    r"|\[[+−-]?\d[\d.,]*, ?[+−-]?\d[\d.,]*\]"  # an interval [a, b]
    rf"|(?<![\w.,])(?:{UNIT})"  # an integer with a unit (865 s, 6 MB, 868 passed), not a name (h27, e2e)
    r"|\b(?:beats?|beaten|beating|loses?|lost|losing|ties?|tied|tying|wins?|won|winning|saves?|saved|savings?"
    r"|faster|slower|outperform(?:s|ed|ing)?|within the noise)\b",
    re.I,
)

#: structural constants a page may write by hand, each with why it is not a result (docs/decisions/claims-are-data.md)
ALLOWED: dict[str, str] = {
    r"\b95 ?%": "the confidence level of every interval, a setting",
    r"Python (?:≥ ?)?3\.\d+": "a Python version (three-part versions such as 2.14.1 are no decimal)",
    r"arXiv:? \d{4}\.\d{4,5}": "the paper's arXiv identifier",
    r"p (?:exceeds|>|≤) 0\.05": "the significance level of every test, a setting",
    r"1-minute load average": "the name of the load average a run records, not a duration",
}
_ALLOWED = re.compile("|".join(f"(?:{pattern})" for pattern in ALLOWED))

#: pages the strict check does not read yet (each is converted by its owner and then leaves this list)
NOT_YET_STRICT: set[str] = {
}


def pages() -> list[Path]:
    """README.md, the model card (models/README.md) and every docs page (the generated API reference aside: it
    prints docstrings)."""
    return [ROOT / "README.md", ROOT / "models" / "README.md",
            *sorted(p for p in (ROOT / "docs").rglob("*.md") if p.parent.name != "api")]


def _blank(match: re.Match) -> str:
    return re.sub(r"[^\n]", " ", match.group())


#: a code span holding nothing but a figure (`0.73`, `12 %`, `[0.1, 0.2]`, `300 s`) hides a claim, so it stays prose
FIGURE_ONLY = re.compile(rf"[+−-]?\d+(?:\.\d+)? ?(?:%|×|x)|[+−-]?\d+\.\d+|\[[+−-]?\d[\d.]*, ?[+−-]?\d[\d.]*\]|{UNIT}", re.I)


def _code_span(match: re.Match) -> str:
    return match.group() if FIGURE_ONLY.fullmatch(match.group()[1:-1]) else _blank(match)


def masked(text: str) -> str:
    """``text`` with everything that is not free prose blanked (newlines kept, so line numbers hold): generated
    blocks, the depth card, the model card's table (``laya.training.bundle.update_model_card``, from each bundled
    checkpoint's ``report.json``), the tutorial's measured block, code blocks and spans (but for a span that holds
    a figure alone), link targets, bare URLs, HTML comments and tags."""
    for pattern in (BLOCK, DEPTH_CARD, MODEL_CARD, OVERVIEW, TUTORIAL_TIMES, re.compile(r"```.*?```", re.S),
                    re.compile(r"<!--.*?-->", re.S)):  # fmt: skip
        text = pattern.sub(_blank, text)
    text = re.sub(r"`[^`\n]*`", _code_span, text)
    for pattern in (re.compile(r"(?<=\])\([^)\s]*\)"), re.compile(r"^\[[^\]]+\]: \S+", re.M), re.compile(r"https?://\S+"),
                    re.compile(r"</?[a-zA-Z][^>]*>")):  # fmt: skip
        text = pattern.sub(_blank, text)
    return text


def claims_in(text: str) -> list[tuple[int, str]]:
    """``(line number, claim)`` for every claim in the free prose of ``text`` (``masked``), allowed constants aside."""
    prose_only = masked(text)
    allowed = [m.span() for m in _ALLOWED.finditer(prose_only)]
    return [(prose_only.count("\n", 0, m.start()) + 1, m.group()) for m in CLAIM.finditer(prose_only)
            if not any(a <= m.start() and m.end() <= b for a, b in allowed)]  # fmt: skip


def counts_in(text: str) -> list[tuple[int, str, str]]:
    """``(line number, count, problem)`` for every count or quantifier in the free prose of ``text`` that is not a
    registered count with its source's number (``claims.counts``), claims found by :func:`claims_in` aside."""
    from claims.counts import counts_in as find

    prose_only = masked(text)
    taken = [m.span() for m in CLAIM.finditer(prose_only)] + [m.span() for m in _ALLOWED.finditer(prose_only)]
    return [(prose_only.count("\n", 0, start) + 1, found, problem) for start, found, problem in find(prose_only)
            if not any(a <= start < b for a, b in taken)]  # fmt: skip


def strict(paths: Iterable[Path]) -> list[str]:
    """``file:line: text`` for every claim in the free prose of ``paths``: a hand-written figure, verdict or count."""
    offences = []
    for path in paths:
        text = path.read_text()
        lines = text.splitlines()
        name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        found = [(line, f"'{claim}' in free prose") for line, claim in claims_in(text)]
        found += [(line, f"'{count}' {problem}") for line, count, problem in counts_in(text)]
        for line, what in sorted(found, key=lambda x: x[0]):
            offences.append(f"{name}:{line}: {what}: {lines[line - 1].strip()[:160]}")
    return offences


def strict_pages() -> list[Path]:
    from fnmatch import fnmatch

    return [p for p in pages() if not any(fnmatch(str(p.relative_to(ROOT)), g) for g in NOT_YET_STRICT)]


def check() -> list[str]:
    problems = stale_blocks() + strict(strict_pages())
    for heading, patterns in SECTIONS.items():
        problems += unsourced(heading, patterns)
    return problems


def write() -> list[Path]:
    """Regenerate every generated block (and the depth and model cards) in place; the files changed."""
    changed = []
    for path in documents():
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
        print("\n".join(problems) or f"no claim in the free prose of {len(paths)} page(s)")
        sys.exit(1 if problems else 0)
    if "--write" in sys.argv[1:]:
        for path in write():
            print(f"rewrote {path.relative_to(ROOT)}")
        return
    problems = check()
    print("\n".join(problems) or "every generated block is current and every quoted number is in its sources")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
