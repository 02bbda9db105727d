"""Which architectures load and attach, and the attached networks' own checks: the result files of
``scripts/backbone_breadth.py``, ``attach_breadth.py`` and ``own_networks.py``."""

from __future__ import annotations

from claims.common import ROOT, wrapped


def backbone_breadth(arg: str) -> str:
    """``backbone-breadth FILE [summary]``: the table of ``python scripts/backbone_breadth.py --out`` from its JSON
    result file (``summary``: the verdict line alone)."""
    from backbone_breadth import markdown, summary

    arg, _, part = arg.partition(" ")
    return summary(ROOT / arg) if part == "summary" else markdown(ROOT / arg)


def attach_breadth(arg: str) -> str:
    """``attach-breadth FILE [summary]``: the table of ``python scripts/attach_breadth.py`` from its JSON result file
    (``summary``: the verdict line alone)."""
    from attach_breadth import markdown, summary

    arg, _, part = arg.partition(" ")
    return summary(ROOT / arg) if part == "summary" else wrapped(markdown(ROOT / arg))


def own_networks(arg: str) -> str:
    """``own-networks DIR``: the checks of ``python scripts/own_networks.py`` (``DIR/*.json``), a row per network."""
    from own_networks import markdown

    return wrapped(markdown(ROOT / arg))


def own_agreement(arg: str) -> str:
    """``own-agreement NAME``: network NAME's cheap-score agreement table (``docs/own-networks/NAME.json``)."""
    from own_networks import agreement_markdown

    return agreement_markdown(arg)




CLAIMS = {"backbone-breadth": backbone_breadth, "attach-breadth": attach_breadth, "own-networks": own_networks,
          "own-agreement": own_agreement}  # fmt: skip
