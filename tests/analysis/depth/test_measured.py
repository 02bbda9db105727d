import pandas as pd
import pytest

from laya.analysis.depth.measured import merge_exits, saving_noise, saving_text, timing_conditions


def exit_run(kind, policy, parameter, accuracy, macs_saved, saved, plain_ms):
    return {"policy": policy, "parameter": parameter, "exits": kind, "exited": 0.5, "mean_layers": 2.0, "macs": 1.0,
            "macs_saved": macs_saved, "accuracy": accuracy, "accuracy_low": accuracy - 0.01,
            "accuracy_high": accuracy + 0.01, "plain_ms_b64": plain_ms, "exit_ms_b64": plain_ms * (1 - saved),
            "saved_b64": saved}  # fmt: skip


def exits_report(machine="cpu", kinds=("readout", "trained mlp")):
    runs = {"readout": [exit_run("readout", "full model", None, 0.90, 0.0, 0.0, 1.0),
                        exit_run("readout", "confidence 0.5", 0.5, 0.85, 0.30, 0.05, 1.0),
                        exit_run("readout", "confidence 0.9", 0.9, 0.895, 0.17, 0.25, 1.2)],
            "trained mlp": [exit_run("trained mlp", "full model", None, 0.90, 0.0, 0.0, 1.0),
                            exit_run("trained mlp", "confidence 0.5", 0.5, 0.80, 0.40, 0.50, 1.5),
                            exit_run("trained mlp", "confidence 0.9", 0.9, 0.90, 0.20, 0.05, 1.0)]}  # fmt: skip
    truncation = [{"layers_kept": 2, "variant": "pruned", "accuracy": 0.9, "accuracy_low": 0.89, "accuracy_high": 0.91,
                   "full_accuracy": 0.9, "macs_speedup": 1.5, "speedup_b64": s, "full_ms_b64": ms}
                  for s, ms in ((1.05, 1.0), (1.30, 1.2))]  # fmt: skip
    return {"command": f"measured on {machine}", "laya_version": "0", "layer_names": ["a", "b", "c"], "n_test": 2000,
            "machine": {"device": machine, "torch_threads": 1}, "runs": [r for k in kinds for r in runs[k]],
            "truncation": truncation if "trained mlp" in kinds else None, "alpha_vs_confidence": None}  # fmt: skip


def test_saving_is_stated_only_beyond_its_own_noise():
    runs = exits_report()["runs"][:3]  # plain timings 1.0 (full model, not counted), 1.0 and 1.2
    assert saving_noise(pd.DataFrame(runs), 64) == pytest.approx(2 * 0.2 / (2 * 1.1))
    assert saving_text(0.23, 0.22) == "+23%" and saving_text(0.21, 0.22) == "within the noise"
    assert saving_text(-0.26, 0.09) == "−26%" and saving_text(0.3, float("nan")) == "within the noise"
    assert saving_text(0.09, 0.04, speedup=True) == "1.09×" and saving_text(0.03, 0.04, speedup=True) == "within the noise"


def test_merge_keeps_the_other_kinds_and_truncation_with_where_they_were_measured():
    old, new = exits_report("old machine"), exits_report("new machine", kinds=("readout",))
    merged = merge_exits(new, old)
    assert [(r["exits"], r["policy"]) for r in merged["runs"]] == [(r["exits"], r["policy"]) for r in old["runs"]]
    assert merged["runs"][:3] == new["runs"] and merged["runs"][3:] == old["runs"][3:]
    assert merged["truncation"] == old["truncation"] and merged["command"] == "measured on new machine"
    assert merged["kept"] == {"command": "measured on old machine", "machine": old["machine"], "laya_version": "0",
                              "kinds": ["trained mlp"], "truncation": True}  # fmt: skip
    assert timing_conditions(merged, "readout") == "new machine, 1 thread"
    assert timing_conditions(merged, "trained mlp") == "old machine, 1 thread"
    # a second re-run keeps the first source
    again = merge_exits(exits_report("third machine", kinds=("readout",)), merged)
    assert again["kept"]["machine"] == old["machine"] and again["runs"][3:] == old["runs"][3:]


def test_merge_replaces_only_the_kinds_measured_again():
    merged = merge_exits(exits_report("new", kinds=("trained mlp",)), exits_report("old"))  # it measured truncation too
    assert [r["exits"] for r in merged["runs"]] == ["trained mlp"] * 3 + ["readout"] * 3
    assert merged["kept"]["kinds"] == ["readout"] and merged["kept"]["truncation"] is False
