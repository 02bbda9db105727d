"""The lens numbers quoted in docs/lens.md (its generated lens-facts block) are the bundled lens.csv files' (python -m laya lens)."""

from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]


def _all(head: str) -> pd.DataFrame:
    table = pd.read_csv(ROOT / "models" / "cifar10-cnn" / head / "lens.csv")
    return table[table["class"] == "all"].set_index("layer")


def test_quoted_lens_numbers_match_the_files():
    text = " ".join((ROOT / "docs" / "lens.md").read_text().split())
    laya, concat = _all("laya"), _all("concat")
    early = laya.loc[[f"block {i}" for i in range(1, 5)]]
    assert set(laya["readout"]) == {"head classifier"} and set(concat["readout"]) == {"linear probes"}
    assert (f"probability of the final class {early['prob'].min():.3f} to {early['prob'].max():.3f}, KL to the "
            f"final prediction {early['kl'].min():.2f} to {early['kl'].max():.2f} nats") in text  # fmt: skip
    assert f"block 5 as the final prediction (KL {laya.loc['block 5', 'kl']:.3f})" in text
    first, last = concat.loc["block 1"], concat.loc["block 5"]
    assert (f"from {first['kl']:.2f} [{first['kl_low']:.2f}, {first['kl_high']:.2f}] at block 1 to "
            f"{last['kl']:.2f} [{last['kl_low']:.2f}, {last['kl_high']:.2f}] at block 5") in text  # fmt: skip
    assert laya["n"].eq(1000).all() and concat["n"].eq(1000).all()
