"""scripts/claims/: the generated sentences word their figures from the files, Holm-corrected, goals computed."""

import json

from tests.scripts.test_prose_claims import claims as prose_claims  # noqa: F401  (puts scripts/ on sys.path)

from claims import comparisons, network, paper, spatial, speed  # noqa: E402


def _comparisons(tmp_path, ps: list[float]) -> str:
    rows = ["comparison,A,B,seeds,over seeds,over inputs (seed 0),p (seeds),p (inputs)"]
    for b, p in zip(("LastLayer", "Concat", "ScalarMix"), ps):
        text = f"LAYA > {b} (paired t-test over seeds, Δ +0.031 [+0.024, +0.038], p={p})"
        rows.append(f'accuracy,LAYA,{b},3,"{text}","{text.replace("t-test over seeds", "bootstrap")}",{p},{p}')
    (tmp_path / "comparisons.csv").write_text("\n".join(rows) + "\n")
    return comparisons.comparisons(str(tmp_path))


def test_a_family_of_comparisons_is_holm_corrected_and_says_so(tmp_path):
    text = _comparisons(tmp_path, [0.01, 0.03, 0.04])
    # Holm over 3: 3 × 0.01 = 0.03 holds; max(0.03, 2 × 0.03) = 0.06 and 0.06 read as ties though each CI excludes 0
    assert "Holm-corrected over these 3 comparisons" in text
    assert "* accuracy: LAYA above LastLayer (+0.031 [+0.024, +0.038], p = 0.01, Holm p = 0.03)" in text
    # the CI printed excludes 0, so the text says which test holds: before correction, not after
    assert ("* accuracy: LAYA significant before correction, not after, against Concat (+0.031 [+0.024, +0.038], "
            "p = 0.03, Holm p = 0.06)") in text
    assert "* accuracy: LAYA significant before correction, not after, against ScalarMix" in text
    assert "not after, against" not in _comparisons(tmp_path, [0.001, 0.002, 0.003])


def test_spatial_verdicts_count_better_and_worse_by_the_metric_s_direction(tmp_path):
    header = "checkpoint,layer,grid,method,metric,n,mean,low,high,diff,diff_low,diff_high,p,verdict"
    rows = [header, "x/laya,block 1,4x4,exact,deletion,10,0.5,0.4,0.6,,,,,",
            "x/laya,block 1,4x4,Grad-CAM,deletion,10,0.4,0.3,0.5,0.1,0.05,0.15,0.0,exact worse",  # higher deletion: worse
            "x/laya,block 1,4x4,HiResCAM,insertion,10,0.4,0.3,0.5,0.1,0.05,0.15,0.0,exact better",  # higher insertion: better
            "x/laya,block 1,4x4,Grad-CAM,insertion,10,0.4,0.3,0.5,0.1,0.01,0.15,0.03,exact better",
            "x/laya,block 1,4x4,LayerCAM,road,10,0.4,0.3,0.5,0.1,0.01,0.15,0.03,exact better"]  # fmt: skip
    checks = {m: f"x/laya,all layers,,occlusion vs random,{m},10,,,,{d},{d - 0.05},{d + 0.05},0.0,discriminates"
              for m, d in (("deletion", -0.1), ("insertion", 0.1), ("road", 0.1))}  # fmt: skip
    # Holm over the 4: 0, 0, then 2 × 0.03 = 0.06 twice: the last two tie though their CIs exclude 0
    (tmp_path / "x.csv").write_text("\n".join([*rows, *checks.values()]) + "\n")
    assert "x/laya (deletion, insertion, ROAD) 1 better / 2 tied / 1 worse of 4" in spatial.spatial_verdict(str(tmp_path))
    # deletion stops discriminating (random ranks above the reference): its comparison leaves the tally and the family
    checks["deletion"] = "x/laya,all layers,,occlusion vs random,deletion,10,,,,0.1,0.05,0.15,0.0,does not discriminate here"
    (tmp_path / "x.csv").write_text("\n".join([*rows, *checks.values()]) + "\n")
    text = spatial.spatial_verdict(str(tmp_path))
    assert "x/laya (insertion, ROAD; deletion does not discriminate here) 1 better / 2 tied / 0 worse of 3" in text
    # no check at all (a CSV written before it): nothing counted, and the sentence says so
    (tmp_path / "x.csv").write_text("\n".join(rows) + "\n")
    text = spatial.spatial_verdict(str(tmp_path))
    assert "better /" not in text and "Not counted: x/laya (no metric check in its CSV)." in text


def test_speed_goals_are_computed_from_the_measurements(tmp_path):
    heads = {h: {"forward_ms": 1.0, "inspect_ms": r, "ratio": r} for h, r in
             (("laya", 1.4), ("scalarmix", 1.6), ("lastlayer", 2.0), ("concat", 2.9))}  # fmt: skip
    mlp = {h: {**v, "ratio": 5.0} for h, v in heads.items()}  # the intrinsic target holds on every setting, IG's not here
    pages = {"cifar10-cnn": {"heads": heads, "pages": {"Inspect": {"ms": 1.3, "ratio": 1.3}}},
             "fashion-mnist-mlp": {"heads": mlp, "pages": {"Inspect": {"ms": 2.4, "ratio": 2.4}}}}
    (tmp_path / "page_costs.json").write_text(json.dumps({"settings": pages}))
    step = {"cpu_p50": 0.2, "cpu_p95": 0.3, "wall_p50": 1.0, "wall_p95": 1.0}
    load = {"sessions": 12, "concurrent": {"first chart": {**step, "cpu_p50": 1.2}, "upload": step, "page:depth": {**step, "cpu_p50": 0.31}},
            "cold": {"restart": {"ready_wall_s": 4.9, "ready_cpu_s": 4.0}}}  # fmt: skip
    (tmp_path / "load_test.json").write_text(json.dumps(load))
    (tmp_path / "cold_open.json").write_text(json.dumps({"goal": 1.5, "ratio": 1.51}))
    (tmp_path / "attach_at_size.json").write_text(json.dumps({"goal": 6.0, "ratio": 5.99, "rss_goal_gb": 3.0,
        "attach_peak_rss_gb": 3.01, "network": "n", "size": 224, "train": 2000, "test": 500}))  # fmt: skip
    row = {"network": "n", "size": 32, "units": 8, "ms": 1.0, "baseline": "one forward", "baseline_ms": 1.0}
    profile = [{**row, "kind": "profile", "view": v, "fallback_units": 0, "references": 8, "ratio": r, "budget": b,
                "references_recorded": b is not None}
               for v, r, b in (("skip", 0.4, 1.0), ("resample", 1.26, 1.25), ("skip", 5.0, None))]  # fmt: skip
    # a checkpoint's first input (references recorded in the call) is shown beside, outside the budget
    views = [{**row, "kind": k, "view": v, "ratio": r, "budget": b} for k, v, r, b in
             (("lens", "tuned lens", 1.1, 1.2), ("lens", "logit lens", 1.2, 1.2), ("gradcam", "Grad-CAM", 3.1, 3.0))]
    for name, rows in zip(speed.NETWORK_FILES, (profile, views)):
        (tmp_path / name).write_text(json.dumps({"rows": rows}))
    goals = speed.speed_goals(str(tmp_path))
    assert ("skip profile over all units (references recorded once per checkpoint) ≤ 1× the wall time of U + 1 "
            "batch-1 forwards: **met** (at most 0.40×)") in goals  # each method against its own budget
    assert ("resample profile over all units (K = 8; references recorded once per checkpoint) ≤ 1.25× its own "
            "suffix work, K rows run from each unit on: **not met** (over it: n at 32 px resample 1.26×)") in goals
    assert "the network lens view ≤ 1.2× a forward: **met** (at most 1.20×)" in goals
    assert "all-unit Grad-CAM ≤ 3× a forward: **not met** (over it: n at 32 px Grad-CAM 3.10×)" in goals
    assert ("intrinsic scores ≤ 1.5× a forward on every bundled setting: **not met** (over it: cifar10-cnn scalarmix "
            "1.60×, fashion-mnist-mlp laya 5.00×, fashion-mnist-mlp scalarmix 5.00×)") in goals
    assert "IG-32 heads ≤ 3× a forward on the CIFAR-10 models: **met** (at most 2.90×)" in goals
    assert ("whole default view (the OOD status included, LAYA) ≤ 1.5× a forward on every bundled setting: **not met** "
            "(over it: fashion-mnist-mlp 2.40×; the page states its cost)") in goals
    assert "first chart ≤ 1 CPU-s (p50, 12 sessions): **not met** (1.20 CPU-s)" in goals
    assert "warm interactions ≤ 0.3 CPU-s (p50): **not met** (over it: page:depth 0.31)" in goals
    assert "cold server ready ≤ 5 s (restart): **met** (4.9 s wall" in goals
    assert ("an attached network's own head opens cold (Inspect's charts) ≤ 1.5× a bundled LAYA head: **not met** "
            "(1.51× the wall time)") in goals
    assert ("an attach with the default flags ≤ 6× one plain forward over the same images (n at 224 px, 2,000 + 500 "
            "images): **met** (5.99×)") in goals
    assert "that attach's peak RSS ≤ 3 GB: **not met** (3.01 GB)" in goals
    assert speed.speed_summary(str(tmp_path)).startswith("Speed goals met: 5 of 13; not met: Inspect's")


def test_the_paper_claims_read_reproduced_only_when_every_comparison_holds(tmp_path, monkeypatch):
    monkeypatch.setattr(paper, "_accuracy", lambda setting: {"LastLayer": ("higher", "+0.031 [+0.024, +0.038]"),
                                                             "Concat": ("tie", "-0.013 [-0.024, +0.002]")})  # fmt: skip
    cell, verdict = paper._highest("cifar10-cnn")
    assert verdict == "not reproduced" and "− Concat -0.013 [-0.024, +0.002] (tie)" in cell
    assert paper._frozen()[1] == "not reproduced"  # Concat must be above LAYA, not tied


def test_the_summary_counts_the_comparisons_that_keep_a_direction(tmp_path):
    setting = tmp_path / "my-setting"
    setting.mkdir()
    _comparisons(setting, [0.01, 0.03, 0.04])
    assert "my-setting 1 of 3 over seeds, 1 of 3 over seed 0's inputs" in comparisons.comparisons_summary(str(tmp_path))


def test_the_grad_cam_choice_names_the_unit_its_rows_choose(tmp_path):
    from tests.hostile import beating_rows, with_gradcam

    record = {"units": ["stem", "layer1", "layer2"]}
    (tmp_path / "network.json").write_text(json.dumps(record))
    assert "predates the Grad-CAM test" in network.gradcam_choice(str(tmp_path))
    (tmp_path / "network.json").write_text(json.dumps(with_gradcam(rows=beating_rows, chosen="layer1")(record)))
    text = network.gradcam_choice(str(tmp_path))
    assert "10 test images, class-balanced, seed 0" in text and "use `layer1`." in text
    row = "| `layer1` | 4×4 | +0.200 [+0.100, +0.300] better than random | +0.000 [-0.100, +0.100] not better "
    assert row in text
    assert "| `stem` | 4×4 |  |  |  | 0.0100 (2.0×) |" in text  # a unit without rows: empty cells, its cost
    check = tmp_path / "check.json"  # a check file keeping the report (scripts/own_networks.py)
    check.write_text(json.dumps({"gradcam": {"max_abs_diff": 0.0}, "network_report": json.loads(
        (tmp_path / "network.json").read_text())}))  # fmt: skip
    assert "use `layer1`." in network.gradcam_choice(str(check)) and row in network.gradcam_choice(str(check))


def test_the_lesion_table_reads_each_unit_its_method_and_the_curve(tmp_path):
    """A folder's network.json and a check file keeping the report under ``network_report`` give one table; a unit
    that got the resample fallback says so; a changed accuracy changes its cell."""
    from tests.hostile import _lesion

    def row(kind: str, unit: str, method: str, accuracy: float) -> dict:
        return {"intervention": kind, "unit": unit, "method": method, "accuracy": accuracy, "low": accuracy - 0.05,
                "high": accuracy + 0.05, "drop": 0.6 - accuracy, "drop_low": 0.5 - accuracy,
                "drop_high": 0.7 - accuracy, "p_value": 0.01}  # fmt: skip

    rows = [row("skip", "stem", "resample", 0.1), row("skip", "layer1", "skip", 0.55), row("resample", "stem",
            "resample", 0.1), row("resample", "layer1", "resample", 0.45)]  # fmt: skip
    record = _lesion(single=rows)({"units": ["stem", "layer1", "layer2"], "residual": [False, True, True]})
    (tmp_path / "network.json").write_text(json.dumps(record))
    (tmp_path / "check.json").write_text(json.dumps({"title": "t", "network_report": record}))
    text = network.lesion(str(tmp_path))
    tables = [[line for line in t.splitlines() if line.startswith("|")]
              for t in (text, network.lesion(str(tmp_path / "check.json")))]  # fmt: skip
    assert tables[0] == tables[1] and len(tables[0]) == 2 + 3 + 2 + 1
    assert "(10 test inputs; 95 % bootstrap CI" in text and "intact accuracy 0.600 [0.500, 0.700]" in text
    assert "| `stem` | no | 0.100 [0.050, 0.150] · +0.500 [+0.400, +0.600] (resample) | 0.100 [0.050, 0.150]" in text
    assert "| `layer1` | yes | 0.550 [0.500, 0.600] · +0.050 [-0.050, +0.150] | 0.450 [0.400, 0.500]" in text
    assert "| `layer2` | yes |  |  |" in text  # not reached: empty cells
    assert "| 0 | 1 | 0.600 (0.000; 0.600–0.600) |" in text
    rows[1]["accuracy"] = 0.35
    (tmp_path / "network.json").write_text(json.dumps(_lesion(single=rows)(record)))
    assert "| `layer1` | yes | 0.350 [" in network.lesion(str(tmp_path))
    del record["lesion"]
    (tmp_path / "network.json").write_text(json.dumps(record))
    assert "predates the lesion study" in network.lesion(str(tmp_path))


def test_the_cold_open_block_reads_its_verdict_from_the_ratio(tmp_path, monkeypatch):
    runs = {case: [{"wall_s": s}] for case, s in zip(("LAYA head", "own head", "own head, drawn"), (10.0, 16.0, 40.0))}
    run = {"command": "c", "date": "d", "setting": "s", "load_average": {"start": [0.5], "end": [0.7]}, "cpus": 2,
           "rounds": 1, "goal": 1.5, "median_wall_s": {c: r[0]["wall_s"] for c, r in runs.items()}, "runs": runs}
    (tmp_path / "cold_open.json").write_text(json.dumps({**run, "ratio": 1.6}))
    monkeypatch.setattr(speed, "ROOT", tmp_path)
    block = speed.cold_open(".")
    assert "| own head | 16.0 | 16.0 |" in block
    assert "1.60× the LAYA head's wall time (goal ≤ 1.5×: **not met**)" in block and "2.50× the stored" in block
    (tmp_path / "cold_open.json").write_text(json.dumps({**run, "ratio": 1.5}))
    assert "(goal ≤ 1.5×: **met**)" in speed.cold_open(".")
