"""benchmarks/page_costs.py: the speed page's block is generated from the committed output, names every page over
3x a forward with its reason, and the committed block is what the script generates now."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "scripts"))

import page_costs


def run(tmp_path: Path, ratios: dict[str, float]) -> Path:
    pages = {page: {"ms": 2.0 * r, "ratio": r} for page, r in ratios.items()}
    heads = {h: {"forward_ms": 2.0, "inspect_ms": 2.4, "ratio": 1.2, "scores": "intrinsic"} for h in ("laya", "scalarmix")}
    data = {"date": "2026-12-01 10:00 UTC", "commit": "abc1234", "threads": 1, "rounds": 30, "cpus": 2,
            "load_average": {"start": [3.25, 0, 0], "end": [4.5, 0, 0]},
            "settings": {"cifar10-cnn": {"forward_ms": 2.0, "decode_ms": 0.15, "pages": pages, "heads": heads}}}  # fmt: skip
    (tmp_path / "page_costs.json").write_text(json.dumps(data))
    return tmp_path


def test_pages_over_the_limit_are_named_with_their_reason(tmp_path):
    text = page_costs.markdown_tables(run(tmp_path, {"Inspect": 1.25, "Compare heads": 4.5, "Class-wise": 0.0}))
    assert "| Inspect | 1.25× (2.5 ms) |" in text and "| Class-wise | none (reads the reports) |" in text
    assert f"* Compare heads on CIFAR-10 CNN (4.50×): {page_costs.PAGES['Compare heads']}." in text
    assert "* Inspect on" not in text  # 1.25x: not over 3x
    assert "| CIFAR-10 CNN | 0.15 ms | 2.00 ms | 1.20× | 1.20× | – | – |" in text  # decoding, beside both sides
    assert "load average 3.2 → 4.5 on 2 CPUs; no GPU" in text
    assert "Server CPU" not in text  # no load test output beside it
    quiet = page_costs.markdown_tables(run(tmp_path, {"Inspect": 1.25}))
    assert f"No page's default view costs more than {page_costs.LIMIT:g}× a forward." in quiet


def test_the_committed_block_is_generated_from_the_committed_output(tmp_path):
    import prose_claims

    text = (ROOT / "docs" / "speed.md").read_text()
    block = text.split("<!-- generated: page-costs docs/speed -->\n", 1)[1].split("<!-- /generated -->", 1)[0]
    assert block == prose_claims.generate("page-costs docs/speed")
    load = json.loads((ROOT / "docs" / "speed" / "load_test.json").read_text())
    assert f"with {load['sessions']} sessions at once" in block and "| page:inspect |" in block
    shutil.copy(ROOT / "docs" / "speed" / "load_test.json", run(tmp_path, {"Inspect": 1.0}) / "load_test.json")
    assert "| first chart |" in page_costs.markdown_tables(tmp_path)


def test_the_committed_costs_cover_every_bundled_setting():
    """A setting bundled after the run would be left out of "every bundled setting" without this: each one is
    measured, and an attached network's own classifier has its network view's row."""
    from laya.app.catalog import find_checkpoints

    run = json.loads((ROOT / "docs" / "speed" / "page_costs.json").read_text())
    bundled = {e.path.parent.name: e.path.parent for e in find_checkpoints(ROOT / "models") if e.head == "laya"}
    assert set(run["settings"]) == set(bundled)
    for name, setting in bundled.items():
        assert (page_costs.OWN_PAGE in run["settings"][name]["pages"]) == (setting / "own").is_dir(), name
        assert name in page_costs.SETTING_TITLES, name
