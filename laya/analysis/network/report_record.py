"""The fields of a stored ``network.json`` (:mod:`laya.analysis.network.report`), each checked for its kind before
any array is read: the file is untrusted (:mod:`laya.model.attached_files`), and a field of the wrong kind is refused
with an :class:`~laya.model.attached_files.AttachedFileError` that names it."""

from __future__ import annotations

from typing import Any

import pandas as pd

from laya.analysis.network.gradcam_choice import METRICS, ROW_COLUMNS, UNIT_COLUMNS, GradcamChoice
from laya.analysis.network.lens_record import check_fit
from laya.analysis.network.lesion import CLASS_COLUMNS, CURVE_COLUMNS, INTACT, SINGLE_COLUMNS, LesionStudy
from laya.analysis.network.scores import AGREEMENT_COLUMNS, TRUST_COLUMNS
from laya.model.attached_files import KINDS, MAX_UNITS, AttachedFileError, field_error

REPORT_JSON = "network.json"
LENS_COLUMNS = ("unit", "kl", "logit_kl", "constant_kl", "agreement")  # lens_fit.lens_summary's records
LESIONS = ("skip", "resample")  # the interventions of a lesion study
MAX_REPORT_JSON = 32 << 20  # a network.json is tens of KB (8 class x unit tables); 1,000 classes stay well inside
LESION_FIELDS = frozenset({"n", "intact", "single", "classes", "curve"})
GRADCAM_FIELDS = frozenset({"n", "seed", "rows", "units", "forward_seconds", "all_seconds", "chosen"})


def _texts(value: Any, field: str, length: int | None = None) -> list[str]:
    if (not isinstance(value, list) or not all(isinstance(v, str) for v in value) or len(value) > MAX_UNITS * 4
            or (length is not None and len(value) != length)):  # fmt: skip
        rule = "must be a list of texts" + ("" if length is None else f", one per unit ({length})")
        raise field_error(REPORT_JSON, field, value, rule)
    return value


def _number(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def agreement_records(rows: Any) -> pd.DataFrame:
    """The ``agreement`` records: a score, an intervention, a mean and CI (numbers or null), ``n`` inputs; and, in a
    report that has them, the baseline columns (``kind`` a text, ``units`` an integer, the margin over the better
    baseline as numbers, ``trusted`` a boolean; each may be null)."""
    if not isinstance(rows, list):
        raise field_error(REPORT_JSON, "agreement", rows, "must be a list of records")
    for i, row in enumerate(rows):
        if (not isinstance(row, dict) or not set(AGREEMENT_COLUMNS) <= set(row) or not isinstance(row["score"], str)
                or not isinstance(row["intervention"], str) or not all(_number(row[k]) for k in AGREEMENT_COLUMNS[2:5])
                or type(row["n"]) is not int or row["n"] < 0
                or not isinstance(row.get("kind"), (str, type(None)))
                or not (row.get("units") is None or (type(row["units"]) is int and row["units"] >= 0))
                or not all(_number(row.get(k)) for k in ("vs_baseline", "vs_low", "vs_high"))
                or not isinstance(row.get("trusted"), (bool, type(None)))):  # fmt: skip
            rule = (f"must hold {', '.join(AGREEMENT_COLUMNS)} (texts, numbers or null, n a non-negative integer) and "
                    f"may hold {', '.join(TRUST_COLUMNS)} (a text, an integer, numbers, a boolean, or null)")
            raise field_error(REPORT_JSON, f"agreement[{i}]", row, rule)
    return pd.DataFrame(rows, columns=[*AGREEMENT_COLUMNS, *TRUST_COLUMNS])


def class_unit_tables(tables: Any, units: list[str], field: str = "tables") -> dict[str, pd.DataFrame]:
    """The ``tables`` (at ``field``): name -> a class x unit table in pandas' ``split`` layout (text index, the
    ``units`` then ``n`` as columns, rows of numbers)."""
    if not isinstance(tables, dict):
        raise field_error(REPORT_JSON, field, tables, "must map table names to tables")
    out = {}
    for name, t in tables.items():
        if (not isinstance(t, dict) or not {"index", "columns", "data"} <= set(t)
                or not isinstance(t["index"], list) or not all(isinstance(v, str) for v in t["index"])
                or t["columns"] != [*units, "n"]
                or not isinstance(t["data"], list) or len(t["data"]) != len(t["index"])
                or not all(isinstance(r, list) and len(r) == len(t["columns"]) and all(map(_number, r))
                           for r in t["data"])):  # fmt: skip
            rule = "must hold an index of texts, the units and n as columns, one row of numbers per index"
            raise field_error(REPORT_JSON, f"{field}[{str(name)[:40]!r}]", t, rule)
        out[name] = pd.DataFrame(t["data"], index=pd.Index(t["index"], name="class"), columns=t["columns"])
    return out


def _records(rows: Any, field: str, columns: tuple[str, ...], texts: int, counts: int,
             most: int | None = MAX_UNITS * 4) -> pd.DataFrame:  # fmt: skip
    """Records of exactly ``columns``: the first ``texts`` texts, the next ``counts`` non-negative integers, the rest
    numbers or null; at most ``most`` (None: as many as the file's size allows)."""
    rule = (f"must be a list of records of {', '.join(columns)} ({texts} texts, {counts} non-negative integers, "
            "then numbers or null)")
    if not isinstance(rows, list) or (most is not None and len(rows) > most):
        raise field_error(REPORT_JSON, field, rows, rule)
    for i, row in enumerate(rows):
        if (not isinstance(row, dict) or set(row) != set(columns)
                or not all(isinstance(row[k], str) for k in columns[:texts])
                or not all(type(row[k]) is int and row[k] >= 0 for k in columns[texts : texts + counts])
                or not all(_number(row[k]) for k in columns[texts + counts :])):  # fmt: skip
            raise field_error(REPORT_JSON, f"{field}[{i}]", row, rule)
    frame = pd.DataFrame(rows, columns=list(columns))
    numbers = list(columns[texts + counts :])
    return frame.astype(dict.fromkeys(numbers, float))  # null as NaN, never None in a number column


def lesion_record(lesion: Any, units: list[str], classes: list[str] | None = None) -> LesionStudy | None:
    """The ``lesion`` section (None where the report has none): ``n`` inputs, ``intact`` (estimate, low, high),
    ``single`` records of units of ``units``, ``classes`` class x (intact, units) tables, ``curve`` records; and, in a
    report that has them, ``by_class`` records (:func:`lesion_class_records`, of ``classes``)."""
    if lesion is None:
        return None
    if not isinstance(lesion, dict) or not LESION_FIELDS <= set(lesion) <= {*LESION_FIELDS, "by_class"}:
        raise field_error(REPORT_JSON, "lesion", lesion, "must hold n, intact, single, classes and curve (and may "
                                                         "hold by_class)")  # fmt: skip
    if type(lesion["n"]) is not int or lesion["n"] < 0:
        raise field_error(REPORT_JSON, "lesion.n", lesion["n"], "must be a non-negative integer")
    intact = lesion["intact"]
    if not isinstance(intact, list) or len(intact) != 3 or not all(map(KINDS["real"][0], intact)):
        raise field_error(REPORT_JSON, "lesion.intact", intact, "must be three finite numbers (estimate, low, high): "
                                                                "the intact network's accuracy is never missing")  # fmt: skip
    single = _records(lesion["single"], "lesion.single", SINGLE_COLUMNS, 3, 0)
    if not set(single["intervention"]) <= set(LESIONS):
        raise field_error(REPORT_JSON, "lesion.single", sorted(set(single["intervention"]) - set(LESIONS)),
                          f"interventions must be among {LESIONS}")  # fmt: skip
    if not set(single["unit"]) <= set(units):
        raise field_error(REPORT_JSON, "lesion.single", sorted(set(single["unit"]) - set(units)),
                          "must name units of the report")  # fmt: skip
    curve = _records(lesion["curve"], "lesion.curve", CURVE_COLUMNS, 0, 2)
    tables = class_unit_tables(lesion["classes"], [INTACT, *units], "lesion.classes")
    by_class = lesion_class_records(lesion.get("by_class"), units, classes)
    return LesionStudy(lesion["n"], intact, single, tables, curve, by_class)


def lesion_class_records(rows: Any, units: list[str], classes: list[str] | None = None) -> pd.DataFrame | None:
    """The lesion study's ``by_class`` records (None where the report has none): an intervention, a class of
    ``classes`` (any text where None) and ``intact`` or a unit of ``units`` as texts, ``n`` inputs, then numbers or
    null (:data:`~laya.analysis.network.lesion.CLASS_COLUMNS`); as many as the file's size allows (classes x units)."""
    if rows is None:
        return None
    table = _records(rows, "lesion.by_class", CLASS_COLUMNS, 3, 1, most=None)
    strangers = sorted(set(table["unit"]) - {INTACT, *units})
    if classes is not None:
        strangers += sorted(set(table["class"]) - set(classes))
    if strangers:
        raise field_error(REPORT_JSON, "lesion.by_class", strangers[:4], "must name units and classes of the report")
    return table


def gradcam_record(value: Any, units: list[str]) -> GradcamChoice | None:
    """The ``gradcam`` section as a :class:`~laya.analysis.network.gradcam_choice.GradcamChoice` (None where the
    report has none): ``n`` and ``seed`` non-negative integers; ``rows`` one record per unit of ``units`` and metric
    (the unit and the metric as texts, then numbers or null); ``units`` one record per unit, in the report's order
    (the grid ``h``, ``w`` non-negative integers, then numbers or null); ``forward_seconds``, ``all_seconds`` numbers or
    null; ``chosen`` the unit its rows choose (or null where none beats random), checked against them."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != GRADCAM_FIELDS:
        raise field_error(REPORT_JSON, "gradcam", value, f"must hold {', '.join(sorted(GRADCAM_FIELDS))}")
    for name in ("n", "seed"):
        if type(value[name]) is not int or value[name] < 0:
            raise field_error(REPORT_JSON, f"gradcam.{name}", value[name], "must be a non-negative integer")
    for name in ("forward_seconds", "all_seconds"):
        if not _number(value[name]):
            raise field_error(REPORT_JSON, f"gradcam.{name}", value[name], "must be a number or null")
    rows = _records(value["rows"], "gradcam.rows", ROW_COLUMNS, 2, 0)
    pairs = list(zip(rows["unit"], rows["metric"]))
    if not set(rows["unit"]) <= set(units) or not set(rows["metric"]) <= set(METRICS) or len(set(pairs)) < len(pairs):
        raise field_error(REPORT_JSON, "gradcam.rows", sorted({f"{u} {m}" for u, m in pairs})[:4],
                          f"must name units of the report and metrics of {', '.join(METRICS)}, each pair once")
    costs = _records(value["units"], "gradcam.units", UNIT_COLUMNS, 1, 2)
    if list(costs["unit"]) != units:
        raise field_error(REPORT_JSON, "gradcam.units", list(costs["unit"])[:4], "must be the report's units in order")
    choice = GradcamChoice(value["n"], value["seed"], rows, costs, value["forward_seconds"], value["all_seconds"])
    if value["chosen"] != choice.chosen:
        raise field_error(REPORT_JSON, "gradcam.chosen", value["chosen"],
                          f"must be the unit its rows choose ({choice.chosen})")  # fmt: skip
    return choice


def lens_section(lens: Any, units: list[str], classes: int) -> dict[str, Any]:
    """The ``lens`` section (``{}`` where the report has none): ``source`` and ``command`` texts, ``fit`` the lens's
    fit summary (:func:`~laya.analysis.network.lens_record.check_fit`), ``units`` one record per unit of the
    report, in its order (:data:`LENS_COLUMNS`: the unit, then numbers or null); each optional."""
    if not isinstance(lens, dict) or not set(lens) <= {"source", "command", "fit", "units"}:
        raise field_error(REPORT_JSON, "lens", lens, "must be a JSON object of source, command, fit and units")
    for field in ("source", "command"):
        if not isinstance(lens.get(field, ""), str):
            raise field_error(REPORT_JSON, f"lens.{field}", lens[field], "must be a text")
    check_fit(lens.get("fit", {}), REPORT_JSON, "lens.fit", units, classes)
    if lens.get("units") is not None:
        rows = _records(lens["units"], "lens.units", LENS_COLUMNS, 1, 0)
        if list(rows["unit"]) != units:
            raise field_error(REPORT_JSON, "lens.units", list(rows["unit"]), "must be one record per unit of the "
                                                                             "report, in its order")  # fmt: skip
    return lens


def checked_record(record: Any) -> dict[str, Any]:
    """``network.json``'s fields, each of its type (module docstring), before any array is read."""
    if not isinstance(record, dict):
        raise field_error(REPORT_JSON, "(the file)", record, "must be a JSON object")
    needed = ("units", "stages", "stage_names", "residual", "method", "methods", "classes", "agreement", "tables",
              "shapes")  # fmt: skip
    if missing := [k for k in needed if k not in record]:
        raise AttachedFileError(REPORT_JSON, f"{REPORT_JSON}: the network report lacks {missing}")
    units = record["units"]
    if not isinstance(units, list) or not 1 <= len(units) <= MAX_UNITS:
        raise field_error(REPORT_JSON, "units", units, f"must be a list of 1 to {MAX_UNITS} unit names")
    U = len(_texts(units, "units"))
    for field in ("stage_names", "methods"):
        _texts(record[field], field, U)
    _texts(record.get("skip_methods", []), "skip_methods")
    _texts(record["classes"], "classes")
    if not isinstance(record["stages"], list) or len(record["stages"]) != U or not all(
            type(v) is int for v in record["stages"]):  # fmt: skip
        raise field_error(REPORT_JSON, "stages", record["stages"], f"must be one integer per unit ({U})")
    if not isinstance(record["residual"], list) or len(record["residual"]) != U or not all(
            type(v) is bool for v in record["residual"]):  # fmt: skip
        raise field_error(REPORT_JSON, "residual", record["residual"], f"must be one true/false per unit ({U})")
    lens_section(record.get("lens", {}), units, len(record["classes"]))
    for field, kind in (("method", str), ("command", str), ("setting_command", str), ("options", dict)):
        if field in record and not isinstance(record[field], kind):
            rule = f"must be a {'text' if kind is str else 'JSON object'}"
            raise field_error(REPORT_JSON, field, record[field], rule)
    if type(record.get("references", 0)) is not int:
        raise field_error(REPORT_JSON, "references", record["references"], "must be an integer")
    shapes = record["shapes"]
    if not isinstance(shapes, dict) or not all(isinstance(v, list) and all(type(d) is int for d in v)
                                               for v in shapes.values()):  # fmt: skip
        raise field_error(REPORT_JSON, "shapes", shapes, "must map array names to lists of integers")
    return record


__all__ = ["GRADCAM_FIELDS", "LENS_COLUMNS", "LESIONS", "LESION_FIELDS", "MAX_REPORT_JSON", "REPORT_JSON",
           "agreement_records", "checked_record", "class_unit_tables", "gradcam_record", "lens_section",
           "lesion_class_records", "lesion_record"]  # fmt: skip
