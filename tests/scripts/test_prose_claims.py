"""scripts/prose_claims.py: the docs' generated blocks are current and their quoted numbers are in the reports."""

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
facts = _load("depth_facts")


def test_the_docs_prose_matches_the_reports():
    """Fails when a generated table, range or verdict is stale, a quoted number or interval is in no source
    file, or a difference is worded against its CI. Fix: `python scripts/prose_claims.py --write` for blocks,
    edit the prose for the rest (the message names the page, section and number)."""
    problems = claims.check()
    assert problems == [], "\n".join(problems)


def test_every_checked_section_exists_and_quotes_files_that_exist():
    for heading, patterns in claims.SECTIONS.items():
        assert claims.section(heading) is not None, heading
        for pattern in patterns:
            if ":" not in pattern:
                assert list(claims.ROOT.glob(pattern)), pattern


def test_sources_match_at_the_precision_written():
    src = claims.Sources(sorted([0.8943, 0.0035, 12.0]), sorted([(0.031, 0.023, 0.038), (-0.18, -0.367, 0.007)]))
    assert src.has_number("0.894") and src.has_number("0.89") and src.has_number("−0.0035")
    assert not src.has_number("0.8942") and not src.has_number("0.895")
    assert src.has_interval("+0.031", "+0.023", "+0.038") and src.has_interval("−0.180", "−0.367", "+0.007")
    assert not src.has_interval("+0.031", "+0.023", "+0.039") and not src.has_interval("0.180", "0.367", "0.007")


def test_a_difference_whose_ci_covers_zero_must_be_called_a_tie_and_only_then():
    ok = "LAYA ties Concat (−0.180 [−0.367, +0.007], p = 0.056). LAYA beats ScalarMix (+0.423 [+0.117, +0.728])."
    assert claims.tie_wording(ok, "page") == []
    overstated = "LAYA is below Concat (−0.180 [−0.367, +0.007], p = 0.056)."
    assert "covers 0" in claims.tie_wording(overstated, "page")[0]
    understated = "LAYA ties ScalarMix (+0.423 [+0.117, +0.728])."
    assert "excludes 0" in claims.tie_wording(understated, "page")[0]
    mixed = "α is below IG (−0.285 [−0.326, −0.244]) and ties Saliency (+0.026 [−0.012, +0.063])."
    assert claims.tie_wording(mixed, "page") == []  # each interval is judged by its own stretch of the sentence
    table = "| LAYA − Concat −0.003 [−0.008, +0.002] | **not reproduced: tie** |"
    assert claims.tie_wording(table, "page") == []  # a table row is one sentence
    levels = "accuracy 0.594 [0.571, 0.616] in every seed"  # not a difference: no sign
    assert claims.tie_wording(levels, "page") == []


def test_prose_leaves_out_generated_blocks_code_and_links():
    text = ("Keep 0.12. <!-- generated: exit-card -->\n| 0.99 |\n<!-- /generated -->`0.5` [x](a0.3.md) "
            "<!-- depth-card:start -->\n0.7\n<!-- depth-card:end -->")
    assert claims.DECIMAL.findall(claims.prose(text)) == ["0.12"]


def test_unknown_generated_block_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown generated block 'nope'"):
        claims.generate("nope models/x")


def _depth(depth: float, over: float, layers: int = 3) -> dict:
    return {"prediction_depth": [{"class": "all", "prediction_depth": depth, "overthought_errors": over}],
            "layer_names": [f"block {i}" for i in range(layers)], "readout_accuracy": [{"estimate": 0.5}] * layers,
            "accuracy": 0.9}  # fmt: skip


def test_depth_facts_ranges_are_min_max_over_checkpoints():
    reports = {("fashion-mnist-mlp", "laya"): _depth(2.87, 0.40), ("fashion-mnist-mlp", "concat"): _depth(1.42, 0.44),
               ("cifar10-cnn", "laya"): _depth(4.77, 0.16, 5), ("cifar10-cnn", "scalarmix"): _depth(4.57, 0.88, 5)}  # fmt: skip
    lines = facts.depth_facts_lines(reports)
    assert "Fashion-MNIST MLP 1.4–2.9 of 3; CNN 4.6–4.8 of 5" in lines[0]
    assert "16–88 % of errors over the 4 checkpoints; lowest CNN LAYA (16%), highest CNN ScalarMix (88%)" in lines[1]
    assert "50% / 50% / 50% accuracy on its 3 blocks vs 90% for the head" in lines[2]


def _exits(saved: list[float], plain: list[float]) -> dict:
    """An exits report: the full model and two confidence runs, each timed against its own plain run at batch 1."""
    full = {"policy": "full model", "exits": "probe", "parameter": float("nan"), "accuracy": 0.9, "macs": 100,
            "macs_saved": 0.0, "plain_ms_b1": 1.0, "saved_b1": 0.0}  # fmt: skip
    runs = [full] + [{"policy": f"confidence {t}", "exits": "probe", "parameter": t, "accuracy": 0.9, "macs": 90 - i,
                      "macs_saved": 0.1, "plain_ms_b1": p, "saved_b1": s}
                     for i, (t, s, p) in enumerate(zip((0.9, 0.99), saved, plain))]  # fmt: skip
    return {"runs": runs}


def test_exit_savings_are_counted_against_their_reports_noise():
    # noise = half-range of the plain timings over their median: (1.2 - 0.8) / (2 * 1.0) = 20 %
    noisy = _exits([0.05, 0.15], [0.8, 1.2])
    quiet = _exits([0.05, 0.15], [0.99, 1.01])  # 1 % noise: both savings exceed it
    lines = facts.exit_facts({("cifar10-cnn", "laya"): noisy, ("cifar10-cnn", "concat"): quiet})
    # best_exit picks the cheaper run (+15 %): a saving's noise is twice the spread, so beyond Concat's ±2 %,
    # stated; inside LAYA's ±40 %, not stated
    expected = ("CNN, probe exits: within 1 point for LAYA, Concat: MACs saved +10%, wall clock saved batch 1 "
                "Concat +15%, 1 within the noise (noise ±2–40%)")  # fmt: skip
    assert lines == [expected]
    assert facts._timed([("laya", 0.04, 0.05)]) == "within the noise (noise ±5%)"
    assert facts._timed([("laya", -0.06, 0.05)]) == "LAYA −6% (noise ±5%)"


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
    found = claims.claims_in(text)
    assert found == [(1, "868 passed"), (1, "28 min"), (1, "42 s"), (1, "2,156 s"), (1, "865 s"), (1, "790 tests"),
                     (1, "3 failed"), (2, "6 MB"), (2, "1 GB"), (2, "2 GiB"), (2, "1 TB"), (2, "20 KB"), (2, "100 ms"), (2, "5 µs"),
                     (2, "4 CPU-s"), (2, "39 min"), (2, "2 minutes"), (2, "1 h"), (2, "56 s"), (5, "300 s"),
                     (5, "868 passed")]  # fmt: skip


def test_strict_check_names_file_and_line(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Page\n\nNo figure here.\nLAYA outperforms it by 0.031.\n")
    assert claims.strict([page]) == [f"{page}:4: 'outperforms' in free prose: LAYA outperforms it by 0.031.",
                                     f"{page}:4: '0.031' in free prose: LAYA outperforms it by 0.031."]  # fmt: skip


def test_the_strict_exemptions_name_pages_that_exist():
    from fnmatch import fnmatch

    names = [str(p.relative_to(claims.ROOT)) for p in claims.pages()]
    for pattern in claims.NOT_YET_STRICT:
        assert any(fnmatch(n, pattern) for n in names), pattern


def test_a_count_in_free_prose_is_a_claim_unless_registered_with_its_source_s_number():
    registered = {name: count() for name, (count, _) in {"checkpoints": claims.COUNTS_REGISTRY["(?:trained |bundled )?checkpoints"],
                  "settings": claims.COUNTS_REGISTRY["(?:bundled )?settings"]}.items()}  # fmt: skip
    text = (f"It ships {registered['checkpoints']} trained\ncheckpoints, five settings and 18 bundled checkpoints.\n"
            "It takes about five minutes on 20 test images; a 5-block CNN; on the last block in every seed;\n"
            "in two of three seeds. Not counts: one layer, L + 1 backbone passes, 224 px images, `--n 500` images.\n")  # fmt: skip
    found = [(line, count) for line, count, _ in claims.counts_in(text)]
    assert found == [(2, "18 bundled checkpoints"), (3, "five minutes"), (3, "20 test images"), (3, "5-block"),
                     (3, "in every seed"), (4, "three seeds")]  # fmt: skip
    assert registered == {"checkpoints": 20, "settings": 5}


def test_the_model_card_is_checked_as_a_page_and_its_table_as_generated(tmp_path):
    """models/README.md is a published page: its counts are claims, and its table (``update_model_card``) must be
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
    assert [count for _, count, _ in claims.counts_in(changed.read_text())] == ["21 bundled checkpoints"]
