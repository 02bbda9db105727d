"""scripts/depth_facts.py by topic: each docs page embeds its own topic's facts, and a wrong topic is named."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
facts = pytest.importorskip("depth_facts")


def test_topics_split_the_whole_list_and_the_summary_is_one_line():
    models = ROOT / "models"
    whole = facts.depth_facts(models)
    parts = "".join(facts.depth_facts(models, topic) for topic in ("detection", "depth", "exits", "truncation"))
    assert whole == parts and whole.count("\n") > 4
    summary = facts.depth_facts(models, "exit-summary")
    assert summary.count("\n") == 1 and summary.startswith("* within 1 point of the full model's accuracy: ")
    assert "trained mlp exits on" in summary and summary not in whole


def test_an_unknown_topic_is_a_clear_error():
    with pytest.raises(ValueError, match=r"unknown depth-facts topic\(s\) \['nope'\]"):
        facts.depth_facts(ROOT / "models", "depth nope")
