"""The depth analytics and the model card, from the bundled reports: ``depth.json``, ``exits.json``, ``lens.csv``,
``layer_profile.csv`` and each checkpoint's ``report.json``."""

from __future__ import annotations

from collections.abc import Callable

from claims.common import ROOT, checkpoints, wrapped


def depth_card(arg: str) -> str:
    from depth_cards import depth_card

    return depth_card(checkpoints("depth.json"))


def model_card(arg: str) -> str:
    from laya.training.bundle import model_card

    return model_card(ROOT / "models")


def measured(card: str) -> Callable[[str], str]:
    def generate(arg: str) -> str:
        import depth_cards

        return getattr(depth_cards, card)(checkpoints("exits.json"))

    return generate



def depth_facts(arg: str) -> str:
    """The bullets of ``python scripts/depth_facts.py models ARG`` (ARG: topics, e.g. ``detection``; none: all)."""
    from depth_facts import depth_facts

    return wrapped(depth_facts(ROOT / "models", arg)) if arg else depth_facts(ROOT / "models")


def depth_table(arg: str) -> str:
    """One table of the depth card (``depth_cards.DEPTH_TABLES[arg]``) over the bundled ``depth.json``."""
    from depth_cards import DEPTH_TABLES

    return wrapped(DEPTH_TABLES[arg](checkpoints("depth.json")))


def spatial_facts(arg: str) -> str:
    """``spatial-facts TOPIC [CHECKPOINT-GLOB]``: ``scripts/spatial_facts.py``'s sentences from the pixel benchmark's
    CSVs in ``docs/spatial_maps`` (empty where no CSV matches)."""
    from spatial_facts import spatial_facts

    topic, _, pattern = arg.partition(" ")
    return wrapped(spatial_facts(ROOT / "docs" / "spatial_maps", topic, pattern.strip()))


def lens_facts(arg: str) -> str:
    """``lens-facts SETTING``: the lens of SETTING's LAYA (its own classifier) and Concat (fitted probes) heads, from
    their ``lens.csv`` (``python -m laya lens``): the early blocks' range, the last block, Concat's first and last."""
    import pandas as pd

    def table(head: str) -> pd.DataFrame:
        frame = pd.read_csv(ROOT / "models" / arg / head / "lens.csv")
        return frame[frame["class"] == "all"].set_index("layer_index")

    laya, concat = table("laya"), table("concat")
    early, last = laya.iloc[:-1], laya.iloc[-1]
    first, deep = concat.iloc[0], concat.iloc[-1]
    return wrapped(f"On the bundled `{arg}` ({int(last['n']):,} test inputs), LAYA's own classifier reads "
            f"{early['layer'].iloc[0]} to {early['layer'].iloc[-1]} with probability of the final class "
            f"{early['prob'].min():.3f} to {early['prob'].max():.3f}, KL to the final prediction "
            f"{early['kl'].min():.2f} to {early['kl'].max():.2f} nats, and {last['layer']} as the final prediction "
            f"(KL {last['kl']:.3f}). Concat's fitted probes read every block, their KL going from "
            f"{first['kl']:.2f} [{first['kl_low']:.2f}, {first['kl_high']:.2f}] at {first['layer']} to "
            f"{deep['kl']:.2f} [{deep['kl_low']:.2f}, {deep['kl_high']:.2f}] at {deep['layer']}.\n")


def alpha_share(arg: str) -> str:
    """``alpha-share SETTING/HEAD``: the mean layer weight α per layer over the test set (``layer_profile.csv``)."""
    import pandas as pd

    frame = pd.read_csv(ROOT / "models" / arg / "layer_profile.csv")
    frame = frame[frame["method"] == "laya_alpha"]
    cells = ", ".join(f"{r.layer} {r.mean:.2g}" for r in frame.itertuples())
    return wrapped(f"Mean α over the `{arg}` test inputs (`layer_profile.csv`): {cells}.\n")


def depth_inputs(arg: str) -> str:
    from depth_facts import depth_inputs

    return wrapped(depth_inputs(ROOT / "models"))




CLAIMS = {"depth-card": depth_card, "model-card": model_card, "exit-card": measured("exit_card"),
          "exit-curves": measured("exit_curves_card"), "truncation-card": measured("truncation_card"),
          "alpha-card": measured("alpha_card"), "depth-facts": depth_facts, "depth-table": depth_table,
          "depth-inputs": depth_inputs, "spatial-facts": spatial_facts, "lens-facts": lens_facts,
          "alpha-share": alpha_share}  # fmt: skip
