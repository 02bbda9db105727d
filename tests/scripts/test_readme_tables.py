"""scripts/readme_tables.py quotes a setting's summary: the README's columns, short score labels."""

import importlib.util
from pathlib import Path

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
    assert module.comparisons(tmp_path) == "* accuracy: LAYA < Concat (p=0.042); over inputs: LAYA < Concat (bootstrap)"
