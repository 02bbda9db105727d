"""scripts/claims/veit.py: each of the three statements' verdicts is read from the files and can fail."""

from __future__ import annotations

import json

import pytest

from tests.scripts.test_prose_claims import claims as prose_claims  # noqa: F401  (puts scripts/ on sys.path)

from claims import veit  # noqa: E402

UNITS = ["bn1", "layer1.0", "layer2.0", "layer2.1"]


def run(name: str, accuracy: list[float], drops: list[tuple[float, float, float]], curve: list[float]) -> dict:
    single = [{"intervention": "skip", "unit": u, "method": "resample" if u == "bn1" else "skip", "accuracy": a,
               "low": a - 0.01, "high": a + 0.01, "drop": d, "drop_low": lo, "drop_high": hi, "p_value": 0.0}
              for u, a, (d, lo, hi) in zip(UNITS, accuracy, drops)]  # fmt: skip
    return {"network": name, "title": name, "epochs": 1, "train_command": f"train {name}",
            "attach_command": f"attach {name}", "classes": [str(c) for c in range(10)], "units": UNITS,
            "residual": [False, True, True, True], "downsampling": [True, False, True, False],
            "lesion": {"n": 100, "intact": [0.9, 0.88, 0.92], "single": single,
                       "curve": [{"k": k, "draws": 1 if k == 0 else 5, "mean": m, "sd": 0.0, "min": m, "max": m}
                                 for k, m in enumerate(curve)]}}  # fmt: skip


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setattr(veit, "ROOT", tmp_path)

    def write(resnet: dict, plain: dict) -> str:
        for name, record in (("resnet20", resnet), ("plain20", plain)):
            (tmp_path / f"{name}.json").write_text(json.dumps(record))
        return "."

    return write


RESNET = run("resnet20", [0.1, 0.85, 0.5, 0.8], [(0.8, 0.7, 0.9), (0.05, 0.03, 0.07), (0.4, 0.35, 0.45),
                                                 (0.1, 0.08, 0.12)], [0.9, 0.8, 0.65, 0.5])  # fmt: skip
PLAIN = run("plain20", [0.1, 0.11, 0.12, 0.15], [(0.8, 0.7, 0.9)] * 4, [0.9, 0.12, 0.1, 0.1])


def test_every_statement_reproduced_on_runs_that_hold_it(folder):
    block = veit.veit_lesion(folder(RESNET, PLAIN))
    assert block.count("reproduced;") == 3 and "not reproduced" not in block
    assert "at most 0.150 accurate (`layer2.1`; chance 0.10" in block
    assert "| `layer2.0` | yes | 0.500 [0.490, 0.510] | 0.120 [0.110, 0.130] |" in block
    assert "| 2 | 5 | 0.650 (0.650–0.650) | 0.100 (0.100–0.100) |" in block
    assert "`bn1`" not in block.split("| block |")[1]  # a stem is only resampled, not deleted


@pytest.mark.parametrize("mutation, claim", [
    (lambda r, p: p["lesion"]["single"][2].update(accuracy=0.21), "Deleting one block of a plain network is fatal"),
    (lambda r, p: r["lesion"]["single"][3].update(drop_high=0.36), "A ResNet loses less"),
    (lambda r, p: r["lesion"]["curve"][2].update(mean=0.82), "A ResNet's accuracy falls smoothly"),
    (lambda r, p: r["lesion"]["curve"][1].update(mean=0.44), "A ResNet's accuracy falls smoothly"),
])  # fmt: skip
def test_each_statement_fails_where_the_runs_break_it(folder, mutation, claim):
    resnet, plain = json.loads(json.dumps(RESNET)), json.loads(json.dumps(PLAIN))
    mutation(resnet, plain)
    block = veit.veit_lesion(folder(resnet, plain))
    assert block.count("not reproduced") == 1
    assert block.split(f"**{claim}", 1)[1].split("**", 1)[1].startswith(": not reproduced;")


def test_the_commands_are_the_recorded_ones(folder):
    commands = veit.veit_commands(folder(RESNET, PLAIN))
    assert commands.startswith("```bash\n# needs: data, long\n")  # never run by the docs' command test
    assert "train resnet20\nattach resnet20\n# plain20: 1 epochs\ntrain plain20" in commands
