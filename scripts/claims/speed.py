"""The speed page's figures and goal verdicts, from the committed benchmark output.

* ``head-cost docs/benchmark-run.txt``: ``benchmarks/head_overhead.py``'s parameters and forward times.
* ``interpretability docs/benchmark-run.txt``: ``benchmarks/interpretability_speed.py``'s ratios per setting (the
  last run of each setting in that section) and whether its two targets are met.
* ``bootstrap-overhead docs/benchmark-run.txt``: ``benchmarks/bootstrap_overhead.py``'s share of an evaluation.
* ``cold-start docs/speed``: ``benchmarks/load_test.py``'s cold starts and import costs (``load_test.json``).
* ``cold-open docs/speed``: ``benchmarks/cold_open.py``'s cold opens of an attached network's own head against a
  bundled LAYA head (``cold_open.json``).
* ``attach-at-size docs/speed``: ``benchmarks/attach_at_size.py``'s attach at the size users train against one
  plain forward over the same images, its peak memory and each step's seconds (``attach_at_size.json``).
* ``speed-goals docs/speed``: every speed goal, met or not, from ``page_costs.json``, ``load_test.json``,
  ``cold_open.json``, ``attach_at_size.json`` and the network views' files below.
* ``network-speed docs/speed``: the network views' costs against their baselines and budgets, met or not, with
  Captum's ``LayerIntegratedGradients`` beside them (``unit_profile_speed.json``, ``network_lens_speed.json``).
"""

from __future__ import annotations

import json
import re

from claims.common import ROOT

#: the speed goals: (what, target); a measured value meets its goal when it is at most the target
INSPECT_INTRINSIC, INSPECT_IG, LOO, IG_PIXELS, FIRST_CHART, WARM, COLD = 1.5, 3.0, 1.3, 20.0, 1.0, 0.3, 5.0
CIFAR = ("cifar10-cnn", "cifar10-efficientnet-lite0", "cifar10-vit")
#: the network views' result files (``benchmarks/unit_profile_speed.py --out``, ``network_lens_speed.py --out``)
NETWORK_FILES = ("unit_profile_speed.json", "network_lens_speed.json")
RUNS_A_FORWARD = ("lens", "gradcam")  # network views that include one forward of the network: never below 1x


def _section(arg: str, start: str, end: str = "\n=== ") -> str:
    """The text of ``arg`` from the first line starting with ``start`` to the next ``end``."""
    text = (ROOT / arg).read_text()
    begin = text.index(start)
    stop = text.find(end, begin + len(start))
    return text[begin: stop if stop >= 0 else None]


def _number(pattern: str, text: str) -> float:
    match = re.search(pattern, text)
    if match is None:
        raise ValueError(f"no {pattern!r} in the benchmark output")
    return float(match.group(1).replace(",", ""))


def head_cost(arg: str) -> str:
    part = _section(arg, "=== head_overhead")
    laya, last = _number(r"LAYA head\s+([\d,]+) parameters", part), _number(r"LastLayer head\s+([\d,]+)", part)
    share = _number(r"\(([\d.]+)% of the backbone\)", part)
    rows = re.findall(r"^\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x$", part, re.M)
    times = "; ".join(f"batch {b}: {float(lay):.2f} vs {float(ll):.2f} ms ({float(r):.2f}×)" for b, ll, lay, r in rows)
    return (f"The LAYA head has {laya:,.0f} parameters ({share:.0f} % of the backbone) against {last:,.0f} for "
            f"LastLayer; a whole forward pass with LAYA against the LastLayer model: {times}.\n")


def _settings(arg: str) -> dict[str, str]:
    """Setting -> the text of its last run in the interpretability section."""
    part = _section(arg, "=== interpretability_speed", "\n=== inspect_speed")
    runs = re.split(r"^== ", part, flags=re.M)[1:]
    return {run.split(" ", 1)[0]: run for run in runs}


def interpretability(arg: str) -> str:
    lines = ["| setting | L | LOO, all layers (batched) | naive per-mask loop | IG-32 over the head's inputs | "
             "IG-32 over pixels | full `evaluate` of 10,000 images vs plain inference |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    loo_met, ig_met = [], []
    for name, run in sorted(_settings(arg).items()):
        loo = _number(r"LOO, all layers \(batched\)\s+[\d.]+ s\s+([\d.]+)x", run)
        pixels = _number(r"IG-32 over pixels\s+([\d.]+)x", run)
        full = re.search(r"full evaluation, [\d,]+ images: ([\d.]+) s vs plain inference ([\d.]+) s = ([\d.]+)x", run)
        layers = int(_number(r"L = (\d+)", run))
        naive = _number(r"naive per-mask loop\s+[\d.]+ s\s+([\d.]+)x", run)
        head_inputs = _number(r"IG-32 over head inputs\s+[\d.]+ s\s+([\d.]+)x", run)
        lines.append(f"| {name} | {layers} | {loo:.2f}× | {naive:.2f}× | {head_inputs:.2f}× | {pixels:.0f}× | "
                     f"{float(full[3]):.1f}× ({float(full[1]):.1f} s vs {float(full[2]):.2f} s) |")  # fmt: skip
        loo_met.append((name, loo <= LOO))
        ig_met.append((name, pixels >= IG_PIXELS))
    return "\n".join(lines) + (f"\n\nTargets: LOO over every layer ≤ {LOO:g}× a forward — {_met(loo_met)}; intrinsic "
                               f"α ≥ {IG_PIXELS:g}× cheaper than IG-32 over pixels — {_met(ig_met)}.\n")  # fmt: skip


def _met(results: list[tuple[str, bool]]) -> str:
    met = [n for n, ok in results if ok]
    missed = [n for n, ok in results if not ok]
    return (f"met on {', '.join(met) or 'none'}" + (f", not met on {', '.join(missed)}" if missed else "")
            if met else f"not met on {', '.join(missed)}")  # fmt: skip


def bootstrap_overhead(arg: str) -> str:
    part = _section(arg, "$ python benchmarks/bootstrap_overhead.py", "\n\n")
    rest, boot = _number(r"evaluation without bootstrap\s+([\d.]+) s", part), _number(r"bootstrap \(CIs \+ paired\)\s+([\d.]+) s", part)
    budget = _number(r"budget: <= ([\d.]+)%", part)
    share = 100 * boot / rest
    return (f"The bootstrap CIs of every report figure and all paired bootstraps take {boot:.1f} s against {rest:.1f} s "
            f"for the rest of the evaluation, +{share:.1f} % (budget ≤ {budget:g} %: "
            f"{_met_word(share <= budget)}).\n")  # fmt: skip


def cold_start(arg: str) -> str:
    load = json.loads((ROOT / arg / "load_test.json").read_text())
    before = load["cold"]["as before (eager imports, no cache)"]["ready_cpu_s"]
    lines = [f"Measured {load['date']} (load average {load['load_average']['start'][0]:.1f} → "
             f"{load['load_average']['end'][0]:.1f} on {load['cpus']} CPUs).", "",
             "| cold start (fresh interpreter → the first page's charts) | CPU-s | wall s | heavy modules loaded |",
             "|---|---|---|---|"]  # fmt: skip
    for name, run in load["cold"].items():
        lines.append(f"| {name} | {run['ready_cpu_s']:.2f} ({run['ready_cpu_s'] / before:.2f}×) | "
                     f"{run['ready_wall_s']:.1f} | {', '.join(run['heavy_modules_loaded']) or 'none'} |")
    imports = ", ".join(f"{name} {cpu:.2f}" for name, cpu in load["imports"].items())
    return "\n".join(lines) + f"\n\nImport costs, CPU-s in a fresh interpreter (each after the ones before): {imports}.\n"


def cold_open(arg: str) -> str:
    """``benchmarks/cold_open.py``'s run in folder ``arg``: each case's median wall seconds and rounds, the ratio of
    the own head to the LAYA head against the goal, and of the references drawn to stored."""
    run = json.loads((ROOT / arg / "cold_open.json").read_text())
    median, cases = run["median_wall_s"], list(run["median_wall_s"])
    lines = [f"`{run['command']}`: {run['date']}, setting `{run['setting']}`, load average "
             f"{run['load_average']['start'][0]:.1f} → {run['load_average']['end'][0]:.1f} on {run['cpus']} CPUs; "
             f"median of {run['rounds']} rounds after a warm-up round, the cases taking turns.", "",
             "| cold open: a fresh interpreter → Inspect's charts | wall s, median | each round |", "|---|---|---|"]
    for case in cases:
        rounds = ", ".join(f"{r['wall_s']:.1f}" for r in run["runs"][case])
        lines.append(f"| {case} | {median[case]:.1f} | {rounds} |")
    verdict = _met_word(run["ratio"] <= run["goal"])
    lines += ["", f"The own head: {run['ratio']:.2f}× the LAYA head's wall time (goal ≤ {run['goal']:g}×: "
                  f"**{verdict}**); drawing its references from the training split instead: "
                  f"{median[cases[2]] / median[cases[1]]:.2f}× the stored references' time."]  # fmt: skip
    return "\n".join(lines) + "\n"


def attach_at_size(arg: str) -> str:
    """``benchmarks/attach_at_size.py``'s run in folder ``arg``: the forward, the attach and its steps, the ratio and
    the peak memory against their goals."""
    run = json.loads((ROOT / arg / "attach_at_size.json").read_text())
    lines = [f"`{run['command']}`: {run['date']}, commit {run['commit']}, {run['network']} at {run['size']} px, "
             f"{run['train']:,} train + {run['test']:,} test images ({run['classes']} classes), {run['threads']} torch "
             f"threads, load average {run['load_average']['start'][0]:.1f} → {run['load_average']['end'][0]:.1f} on "
             f"{run['machine']['cpus']} CPUs. The attach: `{run['attach_command']}`.", "",
             "| run | wall s | × the forward | peak RSS GB |", "|---|---|---|---|",
             f"| one plain forward over the {run['forward_images']:,} images | {run['forward_seconds']:.1f} | 1× | "
             f"{run['forward_peak_rss_gb']:.2f} |",
             f"| the whole attach | {run['attach_seconds']:.1f} | {run['ratio']:.2f}× | {run['attach_peak_rss_gb']:.2f} |"]
    lines += [f"| · {step} | {s:.0f} | {s / run['forward_seconds']:.2f}× | |" for step, s in run["steps"].items()]
    fast, small = run["ratio"] <= run["goal"], run["attach_peak_rss_gb"] <= run["rss_goal_gb"]
    lines += ["", f"The attach: {run['ratio']:.2f}× the forward (goal ≤ {run['goal']:g}×: **{_met_word(fast)}**), "
                  f"peak RSS {run['attach_peak_rss_gb']:.2f} GB (goal ≤ {run['rss_goal_gb']:g} GB: "
                  f"**{_met_word(small)}**)."]  # fmt: skip
    if run.get("network_budget"):  # what the attach's summary said of its network report (absent before the budget)
        lines += ["", f"Its summary: “{run['network_budget']}”"]
    return "\n".join(lines) + "\n"


def _met_word(met: bool) -> str:
    return "met" if met else "not met"


def _goals(arg: str) -> list[tuple[str, bool, str]]:
    """``(goal, met, measured)`` for every speed goal."""
    pages = json.loads((ROOT / arg / "page_costs.json").read_text())["settings"]
    load = json.loads((ROOT / arg / "load_test.json").read_text())
    out = []
    # issue 29's targets: the intrinsic heads on every bundled setting, the IG heads on the CIFAR-10 models
    for heads, target, what, settings, where in (
        (("laya", "scalarmix"), INSPECT_INTRINSIC, "with intrinsic scores", list(pages), "every bundled setting"),
        (("lastlayer", "concat"), INSPECT_IG, "for the IG-32 heads", CIFAR, "the CIFAR-10 models"),
    ):
        ratios = {f"{s} {h}": pages[s]["heads"][h]["ratio"] for s in settings if s in pages for h in heads
                  if h in pages[s]["heads"]}  # fmt: skip
        over = [f"{k} {v:.2f}×" for k, v in ratios.items() if v > target]
        out.append((f"Inspect's explanation {what} ≤ {target:g}× a forward on {where}", not over,
                    f"over it: {', '.join(over)}" if over else f"at most {max(ratios.values()):.2f}×"))
    # the page's whole default view: the explanation with the uncertainty and OOD status, LAYA (the sidebar's first)
    views = {s: pages[s]["pages"]["Inspect"]["ratio"] for s in pages if "Inspect" in pages[s]["pages"]}
    over = [f"{s} {v:.2f}×" for s, v in views.items() if v > INSPECT_INTRINSIC]
    out.append((f"Inspect's whole default view (the OOD status included, LAYA) ≤ {INSPECT_INTRINSIC:g}× a forward on "
                "every bundled setting", not over,
                f"over it: {', '.join(over)}; the page states its cost" if over else f"at most {max(views.values()):.2f}×"))
    first = load["concurrent"]["first chart"]["cpu_p50"]
    out.append((f"a new session's first chart ≤ {FIRST_CHART:g} CPU-s (p50, {load['sessions']} sessions)",
                first <= FIRST_CHART, f"{first:.2f} CPU-s"))
    warm = {k: v["cpu_p50"] for k, v in load["concurrent"].items() if k != "first chart"}
    over = [f"{k} {v:.2f}" for k, v in warm.items() if v > WARM]
    out.append((f"warm interactions ≤ {WARM:g} CPU-s (p50)", not over,
                f"over it: {', '.join(over)}" if over else f"at most {max(warm.values()):.2f} CPU-s"))
    restart = load["cold"]["restart"]
    out.append((f"a cold server ready ≤ {COLD:g} s (restart)", restart["ready_wall_s"] <= COLD,
                f"{restart['ready_wall_s']:.1f} s wall, {restart['ready_cpu_s']:.2f} CPU-s"))
    opened = json.loads((ROOT / arg / "cold_open.json").read_text())
    out.append((f"an attached network's own head opens cold (Inspect's charts) ≤ {opened['goal']:g}× a bundled LAYA "
                "head", opened["ratio"] <= opened["goal"], f"{opened['ratio']:.2f}× the wall time"))
    sized = json.loads((ROOT / arg / "attach_at_size.json").read_text())
    where = f"{sized['network']} at {sized['size']} px, {sized['train']:,} + {sized['test']:,} images"
    out.append((f"an attach with the default flags ≤ {sized['goal']:g}× one plain forward over the same images ({where})",
                sized["ratio"] <= sized["goal"], f"{sized['ratio']:.2f}×"))
    out.append((f"that attach's peak RSS ≤ {sized['rss_goal_gb']:g} GB", sized["attach_peak_rss_gb"] <= sized["rss_goal_gb"],
                f"{sized['attach_peak_rss_gb']:.2f} GB"))
    return out + _goal_rows(arg)


def _network_runs(arg: str) -> list[dict]:
    return [json.loads((ROOT / arg / name).read_text()) for name in NETWORK_FILES]


def _within(row: dict) -> bool:
    """Whether a network view's measured ratio is within its budget."""
    return row["ratio"] <= row["budget"]


def _ratio(ratio: float) -> str:
    return f"{ratio:.2f}×" if ratio < 100 else f"{ratio:,.0f}×"


def _ms(ms: float) -> str:
    return f"{ms:,.1f} ms" if ms < 10_000 else f"{ms / 1e3:,.1f} s"


def _view(row: dict) -> str:
    """A row's view, as the table names it."""
    if row["kind"] == "profile":
        when = ("each further input (references recorded once)" if row.get("references_recorded") else
                "a checkpoint's first input (references recorded in the call)")  # fmt: skip
        if row["view"] == "skip":
            return (f"all-unit profile, skip (resample on {row['fallback_units']} units that are not residual), "
                    f"{when}" if row["fallback_units"] else f"all-unit profile, skip, {when}")  # fmt: skip
        return f"all-unit profile, {row['view']} (K = {row['references']}), {when}"
    if row["kind"] == "captum":
        return f"Captum `LayerIntegratedGradients` ({row['steps']} steps), {row['timed']}"
    return f"{row['view']}, every unit"


def _goal_rows(arg: str) -> list[tuple[str, bool, str]]:
    """``(goal, met, measured)`` for the network views: the profile, the lens view and Grad-CAM, on every network."""
    rows = [r for run in _network_runs(arg) for r in run["rows"] if r["budget"] is not None]
    goal = {"skip": "each input's skip profile over all units (references recorded once per checkpoint) ≤ {budget:g}× "
                    "the wall time of U + 1 batch-1 forwards",
            "resample": "each input's resample profile over all units (K = {K}; references recorded once per "
                        "checkpoint) ≤ {budget:g}× its own suffix work, K rows run from each unit on",
            "lens": "the network lens view ≤ {budget:g}× a forward",
            "gradcam": "all-unit Grad-CAM ≤ {budget:g}× a forward"}  # fmt: skip
    of = lambda r: r["view"] if r["kind"] == "profile" else r["kind"]  # noqa: E731  (a profile's goal: its method's)
    out = []
    for kind in dict.fromkeys(map(of, rows)):
        group = [r for r in rows if of(r) == kind]
        budget = max(r["budget"] for r in group)
        what = goal[kind].format(K=group[0].get("references"), budget=budget)
        over = [f"{r['network']} at {r['size']} px {r['view']} {r['ratio']:.2f}×" for r in group if not _within(r)]
        out.append((what, not over, f"over it: {', '.join(over)}" if over else
                    f"at most {max(r['ratio'] for r in group):.2f}×"))  # fmt: skip
    return out


def network_speed(arg: str) -> str:
    """The network views' costs (``benchmarks/unit_profile_speed.py``, ``network_lens_speed.py``) in folder ``arg``:
    per view and network, the ratio to its baseline measured in one run, the budget and whether it is met; Captum's
    layer IG beside them, and what Captum said where it refused every unit in one call."""
    runs = _network_runs(arg)
    lines = ["Each ratio's two sides timed in one run, in alternating calls, the fastest of each:", ""]
    for run in runs:
        m = run["machine"]
        captum = (f" (Captum's calls: of {run['captum_rounds']}, with {run['captum_forward_repeats']} forwards between "
                  "each)" if "captum_rounds" in run else "")  # fmt: skip
        changes = " with uncommitted changes" if run["uncommitted_changes"] else ""
        lines.append(f"* `{run['command']}`: {run['date']}, commit {run['commit']}{changes}, on {m['cpus']} CPUs "
                     f"({m['cpu']}, device {m['device']}, torch {m['torch']}), {run['threads']} torch thread, fastest "
                     f"of {run['rounds']}{captum}, load average {run['load_average']['start'][0]:.1f} → "
                     f"{run['load_average']['end'][0]:.1f}")  # fmt: skip
    lines += ["", "| view | network | time | baseline | ratio | budget | verdict |", "|---|---|---|---|---|---|---|"]
    for row in (r for run in runs for r in run["rows"]):
        network = f"{row['network']}, {row['size']} px, {row['units']} units"
        baseline = f"{row['baseline']}, {_ms(row['baseline_ms'])}"
        budget = "–" if row["budget"] is None else f"≤ {row['budget']:g}×"
        verdict = "–" if row["budget"] is None else _met_word(_within(row))
        if row["kind"] == "captum" and row["all_in_one_call"]["refused"]:
            error = row["all_in_one_call"]["refused"].split(". ")[0].rstrip(".")
            lines.append(f"| Captum `LayerIntegratedGradients` ({row['steps']} steps), every unit in one call "
                         f"(`layer=[...]`) | {network} | refused: {error}. | – | – | – | – |")  # fmt: skip
        lines.append(f"| {_view(row)} | {network} | {_ms(row['ms'])} | {baseline} | {_ratio(row['ratio'])} | "
                     f"{budget} | {verdict} |")  # fmt: skip
    noise = [f"{_view(r)} on {r['network']} ({r['ratio']:.2f}×)" for run in runs for r in run["rows"]
             if r["kind"] in RUNS_A_FORWARD and round(r["ratio"], 2) < 1]  # fmt: skip
    if noise:
        lines += ["", f"Below one forward, though the view runs one itself, so timing noise of this machine: "
                      f"{', '.join(noise)}."]  # fmt: skip
    return "\n".join(lines) + "\n"


def speed_goals(arg: str) -> str:
    return "\n".join(f"* {goal}: **{_met_word(met)}** ({measured})" for goal, met, measured in _goals(arg)) + "\n"


def speed_summary(arg: str) -> str:
    goals = _goals(arg)
    missed = [goal for goal, met, _ in goals if not met]
    return (f"Speed goals met: {len(goals) - len(missed)} of {len(goals)}" + (f"; not met: {'; '.join(missed)}" if missed else "") + ".\n")


CLAIMS = {"head-cost": head_cost, "interpretability": interpretability, "bootstrap-overhead": bootstrap_overhead,
          "cold-start": cold_start, "cold-open": cold_open, "speed-goals": speed_goals, "speed-summary": speed_summary,
          "network-speed": network_speed, "attach-at-size": attach_at_size}  # fmt: skip
