"""scripts/prose_claims.py: the docs' generated blocks are current and their free prose holds no figure."""

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _load(name: str):
    sys.path.insert(0, str(SCRIPTS))
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


claims = _load("prose_claims")


def test_the_docs_prose_matches_the_reports():
    """Fails when a generated table, range or verdict is stale, or free prose holds a figure or a verdict word.
    Fix: `python scripts/prose_claims.py --write` for blocks; for prose, a generated block or other words (the
    message names the page, line and figure)."""
    problems = claims.check()
    assert problems == [], "\n".join(problems)


def test_unknown_generated_block_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown generated block 'nope'"):
        claims.generate("nope models/x")


def test_strict_check_finds_every_kind_of_claim_in_free_prose_only():
    text = ("# Speed\nIt is 3× faster and saves 12 % (0.47 vs 0.31 ms), a tie [0.1, 0.2].\n"
            "Python ≥ 3.10, `--lr 0.5` [link](a0.3.md) <!-- 0.7 --> 95 % CIs, version 2.14.1, 224x224, 1e-5, 10,000 inputs.\n"
            "A figure alone in a code span is still one: `0.73`, `12 %`, but not `ties` quoted as a word.\n"
            "<!-- generated: exit-card -->\nLAYA beats 0.99\n<!-- /generated -->\nIt loses.\n")  # fmt: skip
    found = claims.claims_in(text)
    assert found == [(2, "3×"), (2, "faster"), (2, "saves"), (2, "12 %"), (2, "0.47"), (2, "0.31"), (2, "tie"),
                     (2, "[0.1, 0.2]"), (4, "0.73"), (4, "12 %"), (8, "loses")]  # fmt: skip


def test_an_integer_with_a_unit_is_a_claim_but_a_named_setting_is_not():
    text = ("The suite: 868 passed in 28 min 42 s; it took 2,156 s (depth alone 865 s), 790 tests, 3 failed.\n"
            "A wheel of about 6 MB, 1 GB RSS, 2 GiB, 1 TB, 20 KB, 100 ms, 5 µs, 4 CPU-s, 39 min, 2 minutes, 1 h, 40–56 s/epoch.\n"
            "Settings: `--timeout 300`, `MAX_BYTES = 20_000_000`, `LAYA_WORKER_TIMEOUT=120` seconds, `max_upload_mb = 20`.\n"
            "Not units: 20 test images, 64 px, 8 runs, branch h27, e2e tests, 128-d, 10 s-curves, the 1990 MBA.\n"
            "A figure alone in a code span is one: `300 s`, `868 passed`.\n")  # fmt: skip
    found = [(line, figure) for line, figure in claims.claims_in(text) if figure != "20 test images"]  # a count
    assert found == [(1, "868 passed"), (1, "28 min"), (1, "42 s"), (1, "2,156 s"), (1, "865 s"), (1, "790 tests"),
                     (1, "3 failed"), (2, "6 MB"), (2, "1 GB"), (2, "2 GiB"), (2, "1 TB"), (2, "20 KB"), (2, "100 ms"), (2, "5 µs"),
                     (2, "4 CPU-s"), (2, "39 min"), (2, "2 minutes"), (2, "1 h"), (2, "56 s"), (5, "300 s"),
                     (5, "868 passed")]  # fmt: skip


def test_a_count_or_a_claim_over_every_seed_is_a_figure_whatever_the_number():
    text = ("It ships 20 trained\ncheckpoints, five settings and 18 bundled checkpoints.\n"
            "It takes about five minutes on 20 test images; a 5-block CNN; on the last block in every seed;\n"
            "in two of three seeds; trained for four epochs, ± 0.3, ±5 points.\n"
            "Not counts: one layer, L + 1 backbone passes, 224 px images, `--n 500` images, mean ± std.\n")  # fmt: skip
    assert [figure for _, figure in claims.claims_in(text)] == [
        "20 trained checkpoints", "five settings", "18 bundled checkpoints", "five minutes", "20 test images",
        "5-block", "in every seed", "three seeds", "four epochs", "± 0.3", "±5"]  # fmt: skip


def test_what_is_not_a_figure():
    """Versions, the arXiv identifier, the confidence and significance levels, names, sizes, dates, list steps,
    headings and bare settings are no results; neither is a verdict word or a count quoted as code."""
    text = ("# 2. Attach it\n\nPython ≥ 3.10, torch 2.5.1, arXiv 2511.12723, 95 % CIs where p ≤ 0.05, CIFAR-10 on a\n"
            "ResNet-18 at 224x224, on 2026-11-30, seed 0, batch 128, patience 5, the 1-minute load average.\n"
            "1. builds the network; 2. attaches it. Quoted: `tie`, `four epochs`, `in every seed`; [a link](x0.5.md).\n")
    assert claims.claims_in(text) == []


def test_strict_check_names_file_and_line(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Page\n\nNo figure here.\nLAYA outperforms it by 0.031.\n")
    assert claims.strict([page]) == [f"{page}:4: 'outperforms' in free prose: LAYA outperforms it by 0.031.",
                                     f"{page}:4: '0.031' in free prose: LAYA outperforms it by 0.031."]  # fmt: skip


def test_the_model_card_is_checked_as_a_page_and_its_table_as_generated(tmp_path):
    """models/README.md is a published page: its counts are figures, and its table (``update_model_card``) must be
    current."""
    card = claims.ROOT / "models" / "README.md"
    assert card in claims.pages()
    text = card.read_text()
    body = claims.MODEL_CARD.search(text).group("body")
    assert claims.stale(card) == [] and body == claims.generate("model-card")
    changed = tmp_path / "README.md"
    changed.write_text(text.replace(body, body.replace("|", "| 0.9999 |", 1)))
    assert claims.stale(changed) == [f"{changed}: the model card is stale (python scripts/prose_claims.py --write)"]
    assert claims.strict([changed]) == []  # a figure inside the generated table is not free prose
    changed.write_text(text.replace(body, "", 1) + "\nIt ships 21 bundled checkpoints.\n")
    assert [figure for _, figure in claims.claims_in(changed.read_text())] == ["21 bundled checkpoints"]
