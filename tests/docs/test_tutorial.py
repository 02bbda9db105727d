"""The offline tutorial (docs/tutorial.md) runs as written: every command of its ``bash`` blocks in a temporary
folder, time-boxed (scripts/tutorial.py); its last step, the dashboard, through AppTest on what it wrote."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from scripts.tutorial import END, START, TUTORIAL, commands, run

REPO = Path(__file__).resolve().parents[2]


def test_the_page_has_every_step_and_measured_times() -> None:
    text = TUTORIAL.read_text()
    steps = commands(text)
    assert steps[0].startswith("python -m laya shapes ")
    assert [s.split()[3] for s in steps[:-1]] == ["shapes", "train", "train", "evaluate", "evaluate", "depth"]
    assert {"--head laya", "--head lastlayer"} <= {f"--head {s.split('--head ')[1].split()[0]}" for s in steps if "--head" in s}
    assert steps[-1] == "LAYA_MODELS=runs/shapes streamlit run app.py"
    times = text.split(START, 1)[1].split(END, 1)[0]
    assert times.count("| `") == len(steps) - 1 and "**total**" in times  # measured, one row per step


def test_tutorial_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run(tmp_path, timeout=2400)  # 2,156 s measured on 2 cores under a load of ~20; minutes on an idle machine
    models = tmp_path / commands(TUTORIAL.read_text())[-1].split()[0].split("=", 1)[1]
    monkeypatch.setenv("LAYA_MODELS", str(models))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120).run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    assert at.sidebar.radio[1].value.endswith("laya") and at.main.metric  # opens on an example evaluate wrote
    assert at.selectbox(key="inspect_example").value.split("-")[2] in ("correct", "wrong")
    at.switch_page("pages/browse.py").run()
    assert not at.exception and len(at.main.dataframe[0].value) == 160  # every test input
    assert "prediction depth" in at.main.dataframe[0].value.columns
