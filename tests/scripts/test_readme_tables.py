"""scripts/readme_tables.py quotes a setting's summary: the results page's columns, short score labels, depth across seeds."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "readme_tables.py"


def _script():
    spec = importlib.util.spec_from_file_location("readme_tables", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_table_quotes_the_summary(tmp_path):
    (tmp_path / "summary.csv").write_text(
        "head,seeds,accuracy,macro-F1,layer scores,Spearman (informative layers),top-1 agreement,"
        "Deletion@1 / oracle,Spearman (all layers),IG Spearman (informative layers),train min/run\n"
        'LAYA,3,"0.8085 ± 0.0028 [0.8016, 0.8155]",x,LAYA α (intrinsic),"0.504 ± 0.004 [0.495, 0.513]",'
        "t,d,s,ig,0.5\n"
    )
    (tmp_path / "comparisons.csv").write_text(
        "comparison,A,B,seeds,over seeds,over inputs (seed 0),p (seeds),p (inputs)\n"
        'accuracy,LAYA,Concat,3,"LAYA < Concat (p=0.042)","LAYA < Concat (bootstrap)",0.042,0.0\n'
    )
    module = _script()
    lines = module.readme_table(tmp_path).splitlines()
    assert [c.strip() for c in lines[0].split("|")[1:-1]] == [
        "head", "seeds", "accuracy", "layer scores", "**Spearman, informative layers**", "top-1 agreement",
        "Deletion@1 / oracle", "Spearman, all layers (paper)"]  # fmt: skip
    cells = [c.strip() for c in lines[2].split("|")[1:-1]]
    assert cells[3:6] == ["α (intrinsic)", "0.504 ± 0.004 [0.495, 0.513]", "t"] and "ig" not in cells
    summary = pd.read_csv(tmp_path / "summary.csv")  # a summary with the robust companions shows them
    summary.insert(8, "Deletion@1 / oracle (5%-trimmed mean)", ["0.906 ± 0.052 [0.776, 1.036]"])
    summary.insert(8, "Deletion@1 / oracle (median)", ["m"])
    summary.to_csv(tmp_path / "summary.csv", index=False)
    header, _, row = module.readme_table(tmp_path).splitlines()
    assert [c.strip() for c in header.split("|")[1:-1]][6:9] == [
        "Deletion@1 / oracle", "Deletion@1 / oracle (median)", "Deletion@1 / oracle (5%-trimmed mean)"]
    assert [c.strip() for c in row.split("|")[1:-1]][6:9] == ["d", "m", "0.906 ± 0.052 [0.776, 1.036]"]
    assert module.comparisons(tmp_path) == "* accuracy: LAYA < Concat (p=0.042); over inputs: LAYA < Concat (bootstrap)"


def test_depth_across_seeds(tmp_path):
    rows = ["class,class_index,layer,layer_index,mean,std,count,head,seed,values"]
    for seed, (a, b) in enumerate(((0.2, 0.8), (0.4, 0.6), (0.9, 0.1))):
        for values in ("scores", "loo"):
            rows += [f"c,0,b1,0,{a},0,10,laya,{seed},{values}", f"c,0,b2,1,{b},0,10,laya,{seed},{values}"]
    (tmp_path / "class_profiles.csv").write_text("\n".join(rows) + "\n")
    first = _script().depth_across_seeds(tmp_path).splitlines()[0]
    assert first == (f"* laya α over the test set (mean ± std over 3 seeds): b1 0.500 ± {np.std([0.2, 0.4, 0.9], ddof=1):.3f}, "
                     f"b2 0.500 ± {np.std([0.8, 0.6, 0.1], ddof=1):.3f}; top layer per seed: b2, b2, b1")  # fmt: skip


def test_scripts_run_from_a_checkout():
    """The docs run them as ``python scripts/<name>.py`` from the repository root, without installing laya."""
    root = SCRIPT.parents[1]
    out = subprocess.run([sys.executable, "scripts/readme_tables.py", "models/fashion-mnist-mlp"], cwd=root,
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert out.startswith("## fashion-mnist-mlp") and "* laya α over the test set (mean ± std over 5 seeds)" in out
    subprocess.run([sys.executable, "scripts/compare_deletion.py", "--help"], cwd=root, capture_output=True, check=True)


def test_scripts_say_what_is_missing(tmp_path):
    """A folder that is not a (bundled) setting: a one-line reason and the command that writes the files."""
    root = SCRIPT.parents[1]
    tables = subprocess.run([sys.executable, "scripts/readme_tables.py", str(tmp_path)], cwd=root,
                            capture_output=True, text=True, check=False)  # fmt: skip
    assert tables.returncode == 1 and "no summary.csv" in tables.stderr and "Traceback" not in tables.stderr
    deletion = subprocess.run([sys.executable, "scripts/compare_deletion.py", str(tmp_path)], cwd=root,
                              capture_output=True, text=True, check=False)  # fmt: skip
    assert deletion.returncode == 2 and "python -m laya bundle" in deletion.stderr
    assert "Traceback" not in deletion.stderr


def test_paper_definition_over_seeds(tmp_path):
    alpha, ig = [0.80, 0.90, 0.85], [0.70, 0.79, 0.76]
    rows = ["head,seed,mode,reduction,method,spearman"]
    rows += [f"laya,{s},zero,signed,laya_alpha,{a}" for s, a in enumerate(alpha)]
    rows += [f"laya,{s},zero,signed,integrated_gradients,{v}" for s, v in enumerate(ig)]
    rows += [f"laya,{s},mean,signed,laya_alpha,0.1" for s in range(3)]  # another intervention: not quoted
    (tmp_path / "results.csv").write_text("\n".join(rows) + "\n")
    line = _script().paper_definition(tmp_path)
    t = stats.ttest_rel(alpha, ig)
    assert line.startswith(
        f"* paper's definition (all layers, frozen-α zero), α over 3 seeds: 0.850 ± {np.std(alpha, ddof=1):.3f} ["
    )
    assert "α > Integrated Gradients (baseline: training mean) (paired t-test over seeds, Δ +0.100 [" in line and f"p={t.pvalue:.2g})" in line
    assert "Gradient × Input" not in line  # not in the results: not invented


def test_overview_quotes_summary_and_verdicts(tmp_path):
    """The results page's overview: LAYA's row of summary.csv and its accuracy verdicts, ties unbolded."""
    setting = tmp_path / "my-setting"
    setting.mkdir()
    (setting / "summary.csv").write_text(
        "head,seeds,accuracy,Spearman (informative layers)\n"
        'LAYA,3,"0.8085 ± 0.0028 [0.8016, 0.8155]","0.504 ± 0.004 [0.495, 0.513]"\n'
        'Concat,3,"0.9 ± 0.1 [0.1, 0.9]",x\n'
    )
    (setting / "comparisons.csv").write_text(
        "comparison,A,B,over seeds,p (seeds)\n"
        'accuracy,LAYA,LastLayer,"LAYA > LastLayer (paired t-test over seeds, Δ +0.031 [+0.023, +0.038], p=0.0035)",0.0035\n'
        'accuracy,LAYA,Concat,"LAYA ≈ Concat: tie (paired t-test over seeds, Δ -0.013 [-0.025, +0.001], p=0.42)",0.42\n'
        'accuracy,LAYA,ScalarMix,"LAYA < ScalarMix (paired t-test over seeds, Δ -0.010 [-0.012, -0.008], p=0.03)",0.03\n'
        'Spearman (informative layers) on LAYA,α,Saliency,"α > Saliency (Δ +0.5 [+0.1, +0.9], p=0.01)",0.01\n'
    )
    lines = _script().overview([setting]).splitlines()
    assert len(lines) == 3
    cells = [c.strip() for c in lines[2].split("|")[1:-1]]
    assert cells == ["[my-setting](docs/results.md#my-setting)", "3", "0.8085 ± 0.0028 [0.8016, 0.8155]",
                     "**+0.031 [+0.023, +0.038]** (p = 0.0035, Holm p = 0.011)", "tie: -0.013 [-0.025, +0.001]",
                     "significant before correction, not after: -0.010 [-0.012, -0.008] (p = 0.03, Holm p = 0.06)",
                     "0.504 ± 0.004 [0.495, 0.513]"]  # fmt: skip  (its CI excludes 0, its Holm p does not hold)
    # Holm over the row's three: 3 × 0.0035, then 2 × 0.03 = 0.06 > 0.05 (a tie although its CI excludes 0), 0.42
