"""Veit, Wilber and Belongie (2016, §4) beside this machine's lesion study of a CIFAR ResNet and its plain twin
(``docs/veit/<name>.json``, written by ``scripts/veit_lesion.py check``).

Three statements of the paper, each read from the files by a rule fixed before the runs:

* **plain**: deleting any one block of the plain network leaves it near chance: every block's accuracy with it
  deleted at most :data:`NEAR_CHANCE` times chance;
* **downsampling**: in the ResNet, skipping a block that keeps the shape costs less than skipping a downsampling
  block: the largest drop of the first is below the smallest of the second, their 95 % bootstrap intervals apart;
* **smooth**: the ResNet's accuracy falls smoothly as more blocks are skipped at once: the mean over the draws never
  rises by more than :data:`RISE` from ``k`` to ``k + 1``, and no step is larger than :data:`STEP` of the intact
  accuracy.
"""

from __future__ import annotations

import json

from claims.common import ROOT, wrapped

from laya.analysis.statistics import format_diff

NEAR_CHANCE = 2.0  # "near chance": at most twice the accuracy of guessing a class
RISE = 0.01  # a mean may rise this much from k to k + 1 (draws of random sets) and still be called falling
STEP = 0.5  # a step larger than this share of the intact accuracy is a cliff, not a smooth fall
WORDS = {True: "reproduced", False: "not reproduced"}


def _load(arg: str, name: str) -> dict:
    return json.loads((ROOT / arg / f"{name}.json").read_text())


def _single(run: dict) -> list[dict]:
    """The rows of each unit skipped alone (``intervention == "skip"``), with whether it changes the shape."""
    down = dict(zip(run["units"], run["downsampling"]))
    return [{**r, "downsampling": down[r["unit"]]} for r in run["lesion"]["single"] if r["intervention"] == "skip"]


def _deletable(rows: list[dict]) -> list[dict]:
    """Units the study deleted (skipped, or their input passed on), not those only resampled (a stem)."""
    return [r for r in rows if r["method"] != "resample"]


def plain_near_chance(run: dict) -> tuple[bool, str]:
    chance = 1 / len(run["classes"])
    rows = _deletable(_single(run))
    worst = max(rows, key=lambda r: r["accuracy"])
    held = worst["accuracy"] <= NEAR_CHANCE * chance
    return held, (f"every one of the {len(rows)} blocks deleted alone leaves {run['network']} at most "
                  f"{worst['accuracy']:.3f} accurate (`{worst['unit']}`; chance {chance:.2f}, the rule ≤ "
                  f"{NEAR_CHANCE:g}× chance)")


def downsampling_costs_more(run: dict) -> tuple[bool, str]:
    rows = _deletable(_single(run))
    keep, down = [r for r in rows if not r["downsampling"]], [r for r in rows if r["downsampling"]]
    if not keep or not down:
        return False, f"{run['network']} has no {'downsampling' if not down else 'shape-keeping'} block to compare"
    worst = max(keep, key=lambda r: r["drop"])
    least = min(down, key=lambda r: r["drop"])
    held = worst["drop_high"] < least["drop_low"]
    return held, (f"the largest drop of a shape-keeping block, `{worst['unit']}` "
                  f"{format_diff(worst['drop'], worst['drop_low'], worst['drop_high'])}, against the smallest of a "
                  f"downsampling block, `{least['unit']}` "
                  f"{format_diff(least['drop'], least['drop_low'], least['drop_high'])}")


def smooth_fall(run: dict) -> tuple[bool, str]:
    curve = sorted(run["lesion"]["curve"], key=lambda r: r["k"])
    means = [r["mean"] for r in curve]
    steps = [b - a for a, b in zip(means, means[1:])]
    intact = means[0]
    rise, cliff = max(steps), -min(steps)
    held = rise <= RISE and cliff <= STEP * intact
    return held, (f"{run['network']}'s mean accuracy from k = 0 to {curve[-1]['k']}: "
                  + ", ".join(f"{m:.3f}" for m in means)
                  + f" (largest rise {rise:+.3f}, largest fall {cliff:.3f} = {cliff / intact:.0%} of intact)")


def veit_lesion(arg: str) -> str:
    """``arg``: the folder of ``resnet20.json`` and ``plain20.json``. The three statements of the module docstring,
    each with its verdict and what it was read from, then per block both networks' accuracy with it skipped alone."""
    resnet, plain = _load(arg, "resnet20"), _load(arg, "plain20")
    checks = [("Deleting one block of a plain network is fatal", plain_near_chance(plain)),
              ("A ResNet loses less by a shape-keeping block than by a downsampling one",
               downsampling_costs_more(resnet)),
              ("A ResNet's accuracy falls smoothly as blocks are skipped together", smooth_fall(resnet))]  # fmt: skip
    lines = [part for claim, (held, why) in checks for part in (wrapped(f"**{claim}**: {WORDS[held]}; {why}."), "")]
    n = resnet["lesion"]["n"]
    lines += [wrapped(f"Accuracy on the {n:,} test images with each block skipped alone (95 % bootstrap CI); "
                          f"intact: {resnet['network']} {resnet['lesion']['intact'][0]:.3f}, {plain['network']} "
                          f"{plain['lesion']['intact'][0]:.3f}. A plain block is deleted by passing its input on, "
                          "which a block that changes the shape cannot be (—); a stem is never deleted (not shown)."),
              "",
              f"| block | downsampling | {resnet['network']} | {plain['network']} |", "|---|---|---|---|"]  # fmt: skip
    by_unit = {r["unit"]: r for r in _deletable(_single(plain))}
    for r in _deletable(_single(resnet)):
        p = by_unit.get(r["unit"])
        other = f"{p['accuracy']:.3f} [{p['low']:.3f}, {p['high']:.3f}]" if p else "—"
        lines.append(f"| `{r['unit']}` | {'yes' if r['downsampling'] else 'no'} | "
                     f"{r['accuracy']:.3f} [{r['low']:.3f}, {r['high']:.3f}] | {other} |")
    lines += ["", "| k blocks skipped at once | draws | " + " | ".join(
        f"{run['network']} mean (min–max)" for run in (resnet, plain)) + " |", "|---|---|---|---|"]  # fmt: skip
    curves = [{r["k"]: r for r in run["lesion"]["curve"]} for run in (resnet, plain)]
    for k in sorted(set(curves[0]) | set(curves[1])):
        cells = [f"{c[k]['mean']:.3f} ({c[k]['min']:.3f}–{c[k]['max']:.3f})" if k in c else "—" for c in curves]
        lines.append(f"| {k} | {curves[0].get(k, curves[1].get(k))['draws']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def veit_commands(arg: str) -> str:
    """The commands that trained and attached both networks, as their files record them."""
    runs = [_load(arg, name) for name in ("resnet20", "plain20")]
    lines = ["```bash", "# needs: data, long"]  # CIFAR-10 and about an hour each on 2 cores
    for run in runs:
        lines += [f"# {run['title']}: {run['epochs']} epochs", run["train_command"], run["attach_command"]]
    return "\n".join([*lines, "```"]) + "\n"


CLAIMS = {"veit-lesion": veit_lesion, "veit-commands": veit_commands}
