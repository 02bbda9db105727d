"""benchmarks/attach_at_size.py: each step's seconds read from attach's progress bar, and the whole benchmark on a
tiny folder (a real attach and a real forward, in fresh interpreters) writing every figure it reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import attach_at_size  # noqa: E402

# attach's bar as tqdm redraws it (carriage returns; an inner bar's line between), hours in the last elapsed time
PROGRESS = (
    "attach bench:   0%|          | 0/6 [00:00<?, ?step/s]\r"
    "attach bench:   0%|          | 0/6 [00:00<?, ?step/s, own head]\n"
    "decoding data/train:  50%|#####     | 1/2 [00:01<00:01, 1.0batch/s]\r"
    "attach bench:  17%|#6        | 1/6 [00:12<01:00, 12.00s/step, own head]\r"
    "attach bench:  17%|#6        | 1/6 [00:12<01:00, 12.00s/step, tuned lens and network report]\r"
    "attach bench:  33%|###3      | 2/6 [01:40<03:20, 50.00s/step, fitting laya]\r"
    "attach bench:  83%|########3 | 5/6 [1:00:05<12:00, 720.00s/step, depth analytics of own]\r"
    "attach bench: 100%|##########| 6/6 [1:01:40<00:00, 616.67s/step, depth analytics of own]\n"
)


def test_step_seconds_are_read_from_the_bar_s_redraws():
    steps = attach_at_size.step_seconds(PROGRESS, total=3710.5)
    assert steps == {"own head": 12.0, "tuned lens and network report": 88.0, "fitting laya": 3505.0,
                     "depth analytics of own": 95.0, attach_at_size.OUTSIDE: 10.5}  # fmt: skip


@pytest.mark.slow  # a tiny attach (no network report) and a forward, each in a fresh interpreter
def test_the_benchmark_runs_on_a_tiny_folder_and_writes_its_figures(tmp_path: Path) -> None:
    flags = ("--heads laya --depth-heads own --max-epochs 1 --patience 1 --ig-steps 2 --train-limit 12 "
             "--random-orders 1 --timing-batch 4 --timing-repeats 1 --resamples 50 --no-network")  # the report: elsewhere
    command = [sys.executable, str(ROOT / "benchmarks" / "attach_at_size.py"), "--data", str(tmp_path / "data"),
               "--train", "12", "--test", "6", "--classes", "3", "--size", "32", "--threads", "1", "--out",
               str(tmp_path / "out"), "--attach-flags", flags]  # fmt: skip
    env = {**os.environ, "LAYA_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "out" / "attach_at_size.json").read_text())
    assert result["forward_images"] == 18 and result["network"] == "torchvision resnet18" and result["size"] == 32
    assert result["ratio"] == pytest.approx(result["attach_seconds"] / result["forward_seconds"], abs=0.006)
    assert 0 < result["attach_peak_rss_gb"] < 8 and 0 < result["forward_peak_rss_gb"] < 8
    assert list(result["steps"])[:2] == ["own head", "fitting laya"]
    assert "depth analytics of own" in result["steps"] and all(s >= 0 for s in result["steps"].values())
    assert sum(result["steps"].values()) == pytest.approx(result["attach_seconds"], abs=0.2)
    assert "--image-size 32" in result["attach_command"] and "TMP" in result["attach_command"]


def test_the_speed_page_block_and_goals_are_computed_from_the_committed_run(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    import prose_claims
    from claims import speed

    text = (ROOT / "docs" / "speed.md").read_text()
    block = text.split("<!-- generated: attach-at-size docs/speed -->\n", 1)[1].split("<!-- /generated -->", 1)[0]
    assert block == prose_claims.generate("attach-at-size docs/speed")
    run = json.loads((ROOT / "docs" / "speed" / "attach_at_size.json").read_text())
    assert sum(run["steps"].values()) == pytest.approx(run["attach_seconds"], abs=0.2)
    for name in ("page_costs.json", "load_test.json", "cold_open.json", *speed.NETWORK_FILES):
        (tmp_path / name).write_text((ROOT / "docs" / "speed" / name).read_text())
    for ratio, rss, verdicts in ((run["goal"] + 0.01, run["rss_goal_gb"], ("not met", "met")),
                                 (run["goal"], run["rss_goal_gb"] + 0.01, ("met", "not met"))):  # fmt: skip
        (tmp_path / "attach_at_size.json").write_text(json.dumps({**run, "ratio": ratio, "attach_peak_rss_gb": rss}))
        goals = {goal: met for goal, met, _ in speed._goals(str(tmp_path))}
        attach_goal = next(g for g in goals if g.startswith("an attach with the default flags"))
        assert (goals[attach_goal], goals["that attach's peak RSS ≤ 3 GB"]) == tuple(v == "met" for v in verdicts)
        assert f"**{verdicts[0]}**), peak RSS" in speed.attach_at_size(str(tmp_path))
