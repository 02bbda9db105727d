"""Breadth check of ``laya attach``: the whole command on many architectures of the four families, end to end.

For each architecture in :data:`ARCHITECTURES` this builds the network with a random (seeded) initialisation and
the tiny dataset's class count, saves its state dict as ``.safetensors``, runs the real attach path on a generated
ImageFolder (``laya.cli.main(["attach", ...])``; a wrapped module: :func:`laya.training.attach.attach`) at the
input side the network is meant for, and then compares the written own head (``<setting>/own``) with the
network's own forward on the test images (float32, eval mode). Each architecture runs in its own process, so a
crash is one row, and writes one JSON record (``WORK/records/<name>.json``; a rerun skips the done ones). The
analyses' sizes are tiny (``TINY``): the point is that every step runs, not the heads' accuracy.

    python scripts/attach_breadth.py --family timm --threads 2        # run (resumable), then write the result file
    python scripts/attach_breadth.py --collect                        # only write the result file from the records
    python scripts/prose_claims.py --write                            # regenerate docs/attach-breadth.md's blocks

Statuses: ``attached`` (the command finished), ``refused`` (it stopped with its error message in its checks, before
its progress bar), ``failed`` (anything else: a traceback, an error in a later step, a process killed, a timeout;
its words are kept as plain text, :func:`error_text`, the whole log is ``WORK/logs/<name>.log``), ``not run``. A
failed attach leaves no setting behind, so only an attached row compares its own head with the network.

    python scripts/attach_breadth.py --only timm-efficientvit_b0 --only wrapped-dict-cnn   # a few, end to end
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULT = ROOT / "docs" / "attach-breadth" / "attach_breadth.json"
TOLERANCE = 1e-5
TIMEOUT = 1200  # seconds one architecture may take (--timeout), the process killed then
TRAIN, TEST, DATA_SIDE = 8, 4, 224  # the shapes ImageFolder: 4 classes, images per class per split, side in px
# laya attach flags that size the fitting and the analyses for 32 training and 16 test images; the network report on
# one test input per class, uncapped, without its Grad-CAM test (three minutes of a ResNet-18's row at 224 px on one
# thread; it runs on attached architectures in tests/training/test_attach_architectures.py and test_attach.py)
TINY = ["--max-epochs", "1", "--patience", "1", "--resamples", "50", "--ig-steps", "4", "--train-limit", "32",
        "--random-orders", "1", "--timing-batch", "4", "--timing-repeats", "1", "--network-limit", "4",
        "--gradcam-sample", "0", "--budget", "0"]  # fmt: skip
# MobileViT-S, the default config, runs a 256 px image in 1.4 s on one thread here; XXS in 0.3 s (timm's row's size)
XXS_MOBILEVIT = {"hidden_sizes": [64, 80, 96], "neck_hidden_sizes": [16, 16, 24, 48, 64, 80, 320], "expand_ratio": 2.0}
ENCODER_BLOCK = "<encoder blocks>"  # a transformers ViT's block list: vit.encoder.layer or vit.layers, by version
TINY_VIT = {"hidden_size": 192, "num_hidden_layers": 12, "num_attention_heads": 3, "intermediate_size": 768}


@dataclass(frozen=True)
class Arch:
    """One architecture: its family, the name the family knows it by, its input side and its arguments."""

    family: str  # timm | torchvision | transformers | wrapped
    model: str  # timm/torchvision name, transformers model_type, or a key of WRAPPED
    size: int = 224
    kwargs: dict = field(default_factory=dict)  # architecture arguments (transformers: config arguments)
    layers: tuple[str, ...] | None = None  # wrapped: the submodules read
    note: str = "native"  # why this input side


ARCHITECTURES: dict[str, Arch] = {
    # timm: the smallest variant of each family, at its native side
    "timm-resnet18": Arch("timm", "resnet18"),
    "timm-convnext_atto": Arch("timm", "convnext_atto"),
    "timm-efficientnet_b0": Arch("timm", "efficientnet_b0"),
    "timm-mobilenetv3_small_100": Arch("timm", "mobilenetv3_small_100"),
    "timm-regnety_002": Arch("timm", "regnety_002"),
    "timm-densenet121": Arch("timm", "densenet121"),
    "timm-vit_tiny_patch16_224": Arch("timm", "vit_tiny_patch16_224"),
    "timm-deit_tiny_patch16_224": Arch("timm", "deit_tiny_patch16_224"),
    "timm-swin_tiny_patch4_window7_224": Arch("timm", "swin_tiny_patch4_window7_224"),
    "timm-levit_128s": Arch("timm", "levit_128s"),  # distilled: two BatchNorm + linear heads, averaged
    "timm-deit_tiny_distilled_patch16_224": Arch("timm", "deit_tiny_distilled_patch16_224"),  # two tokens, two heads
    "timm-efficientvit_b0": Arch("timm", "efficientvit_b0"),
    "timm-efficientvit_m0": Arch("timm", "efficientvit_m0"),  # its classifier: BatchNorm + linear
    "timm-poolformer_s12": Arch("timm", "poolformer_s12"),
    "timm-repvit_m1": Arch("timm", "repvit_m1"),  # distilled: two BatchNorm + linear heads inside one module
    "timm-mobilevit_xxs": Arch("timm", "mobilevit_xxs"),
    "timm-fastvit_t8": Arch("timm", "fastvit_t8"),
    "timm-inception_v3": Arch("timm", "inception_v3"),
    # torchvision: its classification builders, at their native side
    "torchvision-resnet18": Arch("torchvision", "resnet18"),
    "torchvision-mobilenet_v3_small": Arch("torchvision", "mobilenet_v3_small"),
    "torchvision-efficientnet_b0": Arch("torchvision", "efficientnet_b0"),
    "torchvision-regnet_y_400mf": Arch("torchvision", "regnet_y_400mf"),
    "torchvision-densenet121": Arch("torchvision", "densenet121"),
    "torchvision-shufflenet_v2_x0_5": Arch("torchvision", "shufflenet_v2_x0_5"),
    "torchvision-convnext_tiny": Arch("torchvision", "convnext_tiny"),
    "torchvision-swin_t": Arch("torchvision", "swin_t"),
    "torchvision-vit_b_16": Arch("torchvision", "vit_b_16"),
    "torchvision-squeezenet1_0": Arch("torchvision", "squeezenet1_0"),  # a convolutional classifier: refused
    "torchvision-googlenet": Arch("torchvision", "googlenet"),  # auxiliary classifiers: left out
    "torchvision-inception_v3": Arch("torchvision", "inception_v3", size=299),
    "torchvision-mnasnet0_5": Arch("torchvision", "mnasnet0_5"),  # its state dict needs a module version
    "torchvision-mobilenet_v2": Arch("torchvision", "mobilenet_v2"),
    "torchvision-maxvit_t": Arch("torchvision", "maxvit_t"),
    # transformers: ...ForImageClassification built from a config (the small published shapes where one exists)
    "transformers-vit": Arch("transformers", "vit", kwargs={**TINY_VIT, "patch_size": 16}, note="native (ViT-Ti/16)"),
    "transformers-deit": Arch("transformers", "deit", kwargs={**TINY_VIT, "patch_size": 16}, note="native (DeiT-Ti)"),
    "transformers-beit": Arch("transformers", "beit", kwargs={**TINY_VIT, "patch_size": 16}, note="native (BEiT, Ti size)"),
    "transformers-dinov2": Arch("transformers", "dinov2", kwargs={"hidden_size": 384, "num_hidden_layers": 12,
                                "num_attention_heads": 6, "patch_size": 14}, note="the config's 224 (DINOv2-S/14)"),
    "transformers-swin": Arch("transformers", "swin", note="native (Swin-T, the default config)"),
    "transformers-convnext": Arch("transformers", "convnext", note="native (ConvNeXt-T, the default config)"),
    "transformers-resnet": Arch("transformers", "resnet", kwargs={"layer_type": "basic", "depths": [2, 2, 2, 2],
                                "hidden_sizes": [64, 128, 256, 512], "embedding_size": 64}, note="native (ResNet-18)"),
    "transformers-regnet": Arch("transformers", "regnet", note="native (the default config)"),
    "transformers-mobilevit": Arch("transformers", "mobilevit", size=256, kwargs=XXS_MOBILEVIT,
                                   note="native (MobileViT-XXS, apple/mobilevit-xx-small's sizes)"),
    # wrapped: an nn.Module given from Python, its named submodules read through hooks
    "wrapped-torchvision-resnet18": Arch("wrapped", "torchvision-resnet18",
                                         layers=("layer1", "layer2", "layer3", "layer4")),
    "wrapped-timm-vit_tiny": Arch("wrapped", "timm-vit_tiny", layers=("blocks.2", "blocks.5", "blocks.8", "blocks.11")),
    "wrapped-transformers-vit": Arch("wrapped", "transformers-vit", kwargs={**TINY_VIT, "patch_size": 16}, layers=tuple(
        f"{ENCODER_BLOCK}.{i}" for i in (2, 5, 8, 11)), note="native (ViT-Ti/16)"),
    "wrapped-plain-cnn": Arch("wrapped", "plain-cnn", layers=("stem", "stage1", "stage2", "stage3")),
    "wrapped-dict-cnn": Arch("wrapped", "dict-cnn", layers=("stem", "stage1", "stage2", "stage3")),  # returns a dict
    "wrapped-timm-levit_128s": Arch("wrapped", "timm-levit_128s", layers=("stages.0", "stages.1", "stages.2")),
}  # fmt: skip


# --- the networks --------------------------------------------------------------------------------------------


def _plain_cnn(classes: int, as_dict: bool = False):
    """A hand-written network: named convolutional stages, global pooling, a linear classifier; ``as_dict``: its
    forward returns ``{"logits": ..., "embedding": ...}``."""
    from torch import nn

    def stage(cin: int, cout: int) -> nn.Sequential:
        return nn.Sequential(nn.Conv2d(cin, cout, 3, 2, 1), nn.BatchNorm2d(cout), nn.ReLU())

    class PlainCNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem, self.stage1, self.stage2, self.stage3 = stage(3, 16), stage(16, 32), stage(32, 64), stage(64, 96)
            self.pool, self.classifier = nn.AdaptiveAvgPool2d(1), nn.Linear(96, classes)

        def forward(self, x):
            embedding = self.pool(self.stage3(self.stage2(self.stage1(self.stem(x))))).flatten(1)
            logits = self.classifier(embedding)
            return {"logits": logits, "embedding": embedding} if as_dict else logits

    return PlainCNN()


def network(arch: Arch, classes: int):
    """The architecture with ``classes`` outputs and a random initialisation (seed 0), in eval mode."""
    import torch

    torch.manual_seed(0)
    family, name = arch.family, arch.model
    if family == "wrapped":
        family, _, name = name.partition("-")
        if family in ("plain", "dict"):
            return _plain_cnn(classes, as_dict=family == "dict").eval()
        name = {"vit_tiny": "vit_tiny_patch16_224"}.get(name, name)
    if family == "timm":
        import timm

        return timm.create_model(name, num_classes=classes, **arch.kwargs).eval()
    if family == "torchvision":
        import torchvision

        return torchvision.models.get_model(name, num_classes=classes, **arch.kwargs).eval()
    from transformers import AutoConfig, AutoModelForImageClassification

    kwargs = {**arch.kwargs, "num_labels": classes, "image_size": arch.size}
    if "depths" in kwargs and name in ("convnext", "regnet"):
        kwargs.setdefault("num_stages", len(kwargs["depths"]))  # as laya's transformers family builds it
    config = AutoConfig.for_model(name, **kwargs)
    config.architectures = []  # DeiT has two classification classes: the first, the plain one (as laya builds it)
    return AutoModelForImageClassification.from_config(config).eval()


def logits_of(net, x):
    """The network's logits on ``x``: a tensor, a transformers output's ``.logits``, a dict's ``"logits"``."""
    from laya.model.backbones.pre_logits import logits_of as read

    return read(net(x))


def dataset(work: Path) -> Path:
    """The shapes ImageFolder (``laya shapes``) the sweep attaches to, written once."""
    from laya.data.synthetic import make_shapes

    root = work / "data" / "shapes"
    if not (root / "test").is_dir():
        make_shapes(root, TRAIN, TEST, DATA_SIDE, seed=0)
    return root


# --- one architecture, in its own process --------------------------------------------------------------------


def run_one(name: str, work: Path, threads: int) -> int:
    """Build, save, attach and compare ``name``; writes ``WORK/records/<name>.part.json``; the attach's exit code."""
    import torch
    from safetensors.torch import save_file

    from laya.data.synthetic import SHAPES

    torch.set_num_threads(threads)
    arch, data = ARCHITECTURES[name], dataset(work)
    net = network(arch, len(SHAPES))
    weights = work / "weights" / f"{name}.safetensors"
    weights.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().clone().contiguous() for k, v in net.state_dict().items()}, weights)
    out = work / "runs"
    record = {"params": sum(p.numel() for p in net.parameters())}
    start = time.perf_counter()
    try:
        if arch.family == "wrapped":
            rc = _attach_wrapped(arch, net, data, out / name)
        else:
            from laya.cli import main

            rc = main(["--threads", str(threads), "attach", "--family", arch.family, "--model", arch.model, "--weights",
                       str(weights), "--dataset", str(data), "--image-size", str(arch.size), "--out", str(out),
                       "--setting", name, "--overwrite", "--model-kwargs", json.dumps(arch.kwargs), *TINY])  # fmt: skip
    except Exception as error:  # a crash: its traceback in the log, its last line in the record, the own head compared
        traceback.print_exc()
        rc, record["error"] = 1, f"{type(error).__name__}: {error}"
    record.update(attach_s=time.perf_counter() - start, threads=threads, load_average=os.getloadavg()[0])
    own = out / name / "own"
    if (own / "model.json").is_file():  # a failed attach leaves no setting (it is written whole or not at all)
        record.update(compare(own, net, arch))
    (work / "records" / f"{name}.part.json").write_text(json.dumps(record) + "\n")
    return rc


def _layers(arch: Arch, net) -> list[str]:
    """The wrapped layers by the names this version of the network's library gives them (:data:`ENCODER_BLOCK`:
    the transformers ViT's encoder block list, ``vit.encoder.layer`` or ``vit.layers``)."""
    names = {name for name, _ in net.named_modules()}
    blocks = next((b for b in ("vit.encoder.layer", "vit.layers") if f"{b}.0" in names), ENCODER_BLOCK)
    return [layer.replace(ENCODER_BLOCK, blocks) for layer in arch.layers]


def _attach_wrapped(arch: Arch, net, data: Path, setting: Path) -> int:
    """``attach(AttachConfig(family="wrapped"))`` with laya attach's tiny flags; 2 with ``error: ...`` on a refusal,
    as the command line answers."""
    from laya.analysis.depth.report import DepthOptions
    from laya.analysis.evaluate import EvalOptions
    from laya.analysis.network.report import NetworkOptions
    from laya.training.attach import AttachConfig, attach

    flags = dict(zip(TINY[::2], TINY[1::2]))
    config = AttachConfig(
        family="wrapped", model=None, weights=None, dataset=str(data), out=str(setting.parent), setting=setting.name,
        overwrite=True, image_size=arch.size, layers=_layers(arch, net), max_epochs=int(flags["--max-epochs"]),
        patience=int(flags["--patience"]),
        evaluation=EvalOptions(resamples=int(flags["--resamples"]), ig_steps=int(flags["--ig-steps"])),
        depth=DepthOptions(train_limit=int(flags["--train-limit"]), resamples=int(flags["--resamples"]),
                           random_orders=int(flags["--random-orders"]), timing_batch=int(flags["--timing-batch"]),
                           timing_repeats=int(flags["--timing-repeats"])),
        network=NetworkOptions(limit=int(flags["--network-limit"]), gradcam_sample=int(flags["--gradcam-sample"]),
                               resamples=int(flags["--resamples"]), timing_repeats=int(flags["--timing-repeats"]),
                               budget=float(flags["--budget"])),
    )  # fmt: skip
    try:
        attach(config, module=net)
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def compare(own: Path, net, arch: Arch) -> dict:
    """The written own head against the network's forward on the test images: largest |difference| of the logits."""
    import torch

    from laya.model.checkpoint import load_checkpoint

    checkpoint = load_checkpoint(own, module=net if arch.family == "wrapped" else None)
    x = checkpoint.preprocess(checkpoint.load_data("test").images)
    with torch.no_grad():
        got, expected = checkpoint.model(x).logits, logits_of(net, x)
    diff = (got - expected).abs().max().item()
    return {"layer_names": list(checkpoint.layer_names), "compared": len(x), "max_abs_diff": diff,
            "max_abs_logit": expected.abs().max().item(), "same_top1": bool((got.argmax(1) == expected.argmax(1)).all()),
            "within_tolerance": diff <= TOLERANCE}  # fmt: skip


# --- the sweep -----------------------------------------------------------------------------------------------


ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")  # terminal control sequences (tqdm's cursor moves)
BAR = re.compile(r"\d+%\||[?\d.]+(it|s|step|batch)/(s|it|step|batch)\b|^\[[0-9;]*[A-Za-z]$")  # a bar, or a
# control sequence whose escape character was lost (the "[A" an older run recorded as an error)


def error_text(log: str, returncode: int | None) -> str:
    """A failure's words as plain text: the signal that killed the process, else the ``error: ...`` line of a
    refusal, else the traceback's last line; terminal control sequences and progress bars dropped."""
    if returncode is not None and returncode < 0:
        name = signal.Signals(-returncode).name if -returncode in signal.valid_signals() else str(-returncode)
        return f"killed by {name}" + (" (out of memory, most likely)" if name == "SIGKILL" else "")
    text = ESCAPES.sub("", log).replace("\r", "\n")
    lines = [x for x in (line.strip() for line in text.splitlines()) if x and not BAR.search(x)]
    errors = [x.removeprefix("error: ") for x in lines if x.startswith("error: ")]
    if errors:
        return errors[-1]
    return lines[-1] if lines else "no error text (the process ended without one)"


def network_written(work: Path, name: str, log: str) -> dict:
    """Whether an attached row's attach wrote its network report, and what it said where not (from its log)."""
    written = {"network_report": (work / "runs" / name / "own" / "network.json").is_file()}
    if (why := re.search(r"Network report not written: (.+)", log)) is not None:
        written["network_error"] = ESCAPES.sub("", why.group(1)).strip()
    return written


def started(log: str, name: str) -> bool:
    """Whether the attach of ``name`` got past its checks: its progress bar (``attach <name>``) was drawn."""
    return f"attach {name}:" in log


def sweep(names: list[str], work: Path, threads: int, force: bool, timeout: int) -> None:
    """Run each architecture not yet recorded (all with ``force``) in its own process; one progress line each."""
    records = work / "records"
    records.mkdir(parents=True, exist_ok=True)
    todo = [n for n in names if force or not (records / f"{n}.json").is_file()]
    print(f"{len(names) - len(todo)} of {len(names)} already recorded; running {len(todo)}", file=sys.stderr)
    dataset(work)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(threads)}
    spent: list[float] = []
    for i, name in enumerate(todo):
        arch, log = ARCHITECTURES[name], work / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        (records / f"{name}.part.json").unlink(missing_ok=True)
        start = time.perf_counter()
        with log.open("w") as stream:
            try:
                rc = subprocess.run([sys.executable, __file__, "--one", name, "--work", str(work), "--threads",
                                     str(threads)], stdout=stream, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                                    timeout=timeout).returncode  # fmt: skip
            except subprocess.TimeoutExpired:
                rc = None
        seconds = time.perf_counter() - start
        part = records / f"{name}.part.json"
        measured = json.loads(part.read_text()) if part.is_file() else {}
        own_written = "max_abs_diff" in measured
        text = log.read_text(errors="replace")
        status = "attached" if rc == 0 else "refused" if rc == 2 and not started(text, name) else "failed"
        error = "" if rc == 0 else f"timed out after {timeout} s" if rc is None else error_text(text, rc)
        error = ESCAPES.sub("", measured.pop("error", None) or error)
        record = {"name": name, **asdict(arch), "status": status, "error": error, "seconds": seconds,
                  "timeout": timeout, **measured}  # fmt: skip
        if status == "attached":
            record.update(network_written(work, name, text))
        (records / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
        part.unlink(missing_ok=True)
        spent.append(seconds)
        eta = sum(spent) / len(spent) * (len(todo) - i - 1)
        diff = f"max|Δ| {measured['max_abs_diff']:.1e}" if own_written else "no own head"
        print(f"[{i + 1}/{len(todo)}] {name}: {status} ({diff}) in {seconds:.0f} s; ETA {eta / 60:.0f} min"
              + (f"\n    {error}" if error else ""), file=sys.stderr)  # fmt: skip


def collect(work: Path, threads: int) -> dict:
    """The result file: every listed architecture, its record or ``not run``, and the run's conditions."""
    import timm
    import torch
    import torchvision
    import transformers

    results = []
    for name, arch in ARCHITECTURES.items():
        path = work / "records" / f"{name}.json"
        record = (json.loads(path.read_text()) if path.is_file() else
                  {"name": name, **asdict(arch), "status": "not run", "error": ""})  # fmt: skip
        if record["status"] == "attached" and not record.get("network_report") and "network_error" not in record:
            log = work / "logs" / f"{name}.log"  # a record from before these fields: the attach's folder and log
            record.update(network_written(work, name, log.read_text(errors="replace") if log.is_file() else ""))
        results.append(record)
    versions = {m.__name__: m.__version__ for m in (torch, timm, torchvision, transformers)}
    loads = [r["load_average"] for r in results if "load_average" in r]
    threads = max((r["threads"] for r in results if "threads" in r), default=threads)
    return {"architectures": len(ARCHITECTURES), "tolerance": TOLERANCE, "threads": threads, "cpus": os.cpu_count(),
            "load_average": [min(loads), max(loads)] if loads else None, "versions": versions, "flags": TINY,
            "data": {"classes": 4, "train_per_class": TRAIN, "test_per_class": TEST, "side": DATA_SIDE},
            "results": results}  # fmt: skip


# --- the docs ------------------------------------------------------------------------------------------------


def _cell(text: str, width: int = 160) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


def table(run: dict) -> str:
    """Markdown table: one row per architecture (status, the own head against the network, time, input side)."""
    rows = ["| family | architecture | input | status | own head vs network: max \\|Δ logit\\| | layers read | "
            "network report | parameters | time (s): attach / all | refusal or failure |",
            "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in run["results"]:
        model = r["model"] + (f" {json.dumps(r['kwargs'], separators=(',', ':'))}" if r["kwargs"] else "")
        if "max_abs_diff" in r:
            ok = "✓" if r["within_tolerance"] else "✗"
            diff = f"{ok} {r['max_abs_diff']:.1e} ({r['compared']} images, logits up to {r['max_abs_logit']:.2g})"
        else:
            diff = "—"
        layers = len(r["layer_names"]) if r.get("layer_names") else "—"
        params = f"{r['params'] / 1e6:.1f} M" if r.get("params") else "—"
        seconds = f"{r['attach_s']:.0f} / {r['seconds']:.0f}" if r.get("attach_s") else "—"
        report = {True: "written", False: "not written"}.get(r.get("network_report"), "—")
        said = r["error"] or (f"network report: {r['network_error']}" if r.get("network_error") else "")
        rows.append(f"| {r['family']} | `{_cell(model, 120)}` | {r['size']} px, {r['note']} | {r['status']} | {diff} | "
                    f"{layers} | {report} | {params} | {seconds} | {_cell(said) or '—'} |")
    return "\n".join(rows)


def _families(results: list[dict]) -> str:
    counts: dict[str, list[int]] = {}
    for r in results:
        c = counts.setdefault(r["family"], [0, 0])
        c[0] += r["status"] == "attached"
        c[1] += r["status"] != "not run"
    return ", ".join(f"{f} {a} of {n}" for f, (a, n) in counts.items() if n)


def markdown(path: Path) -> str:
    """The generated block of ``docs/attach-breadth.md``: the table and the run's conditions, from the result file."""
    run = json.loads(path.read_text())
    ran = [r for r in run["results"] if r["status"] != "not run"]
    d, v, load = run["data"], run["versions"], run["load_average"]
    load = f"load average {load[0]:.0f} to {load[1]:.0f}" if load else "load average not recorded"
    return (
        f"{table(run)}\n\n{len(ran)} of {run['architectures']} architectures run, {sum(r['seconds'] for r in ran):.0f} s "
        f"in all on {run['threads']} torch threads, {load} on {run['cpus']} cores; "
        f"the shapes ImageFolder, {d['classes']} classes of {d['train_per_class']} training and {d['test_per_class']} "
        f"test images at {d['side']} px; laya attach flags `{' '.join(run['flags'])}` (torch {v['torch']}, timm "
        f"{v['timm']}, torchvision {v['torchvision']}, transformers {v['transformers']}; "
        f"`python scripts/attach_breadth.py`){_boxes(ran)}.\n"
    )  # fmt: skip


def _boxes(results: list[dict]) -> str:
    """The rows run in another time box than the script's default (``--timeout``), as a clause."""
    other = [f"{r['name']} {r['timeout']} s" for r in results if r.get("timeout", TIMEOUT) != TIMEOUT]
    return f"; a row's time box {TIMEOUT} s, but for {', '.join(other)} (`--timeout`)" if other else ""


def summary(path: Path) -> str:
    """The page's verdict line: attached of those run, per family, and the largest logit difference."""
    run = json.loads(path.read_text())
    ran = [r for r in run["results"] if r["status"] != "not run"]
    attached = [r for r in ran if r["status"] == "attached"]
    compared = [r for r in ran if "max_abs_diff" in r]
    within = sum(bool(r["within_tolerance"]) for r in compared)
    largest = max((r["max_abs_diff"] for r in compared), default=float("nan"))
    missing = [r["name"] for r in run["results"] if r["status"] == "not run"]
    text = (f"**Verdict:** `laya attach` attached {len(attached)} of the {len(ran)} architectures run "
            f"({_families(ran)}); the own head's logits equal the network's within {_tolerance(run)} on "
            f"{within} of the {len(compared)} compared (largest difference {largest:.1e})")  # fmt: skip
    not_attached = [f"{r['name']} {r['status']}" for r in ran if r["status"] != "attached"]
    text += f"; not attached: {', '.join(not_attached)}" if not_attached else ""
    text += f"; not run yet: {len(missing)} ({_families_missing(run['results'])})" if missing else ""
    return text + " (`docs/attach-breadth/attach_breadth.json`).\n"


def _tolerance(run: dict) -> str:
    return f"{run['tolerance']:g}".replace("e-0", "e-")  # 1e-5, not 1e-05


def _families_missing(results: list[dict]) -> str:
    counts: dict[str, int] = {}
    for r in results:
        if r["status"] == "not run":
            counts[r["family"]] = counts.get(r["family"], 0) + 1
    return ", ".join(f"{f} {n}" for f, n in counts.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "attach-breadth",
                        help="records, logs, weights, data and attached folders (default: runs/attach-breadth)")
    parser.add_argument("--out", type=Path, default=RESULT, help=f"result file (default: {RESULT.relative_to(ROOT)})")
    parser.add_argument("--only", action="append", help="architecture name (repeatable; see ARCHITECTURES)")
    parser.add_argument("--family", action="append", choices=["timm", "torchvision", "transformers", "wrapped"])
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads per architecture (default 1)")
    parser.add_argument("--force", action="store_true", help="rerun architectures already recorded")
    parser.add_argument("--timeout", type=int, default=TIMEOUT, help="seconds before one architecture counts as failed")
    parser.add_argument("--collect", action="store_true", help="run nothing; write the result file from the records")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the worker process of one architecture
    args = parser.parse_args()
    if args.one:
        sys.exit(run_one(args.one, args.work, args.threads))
    unknown = [n for n in args.only or [] if n not in ARCHITECTURES]
    if unknown:
        parser.error(f"unknown architecture(s) {unknown}; choose from {', '.join(ARCHITECTURES)}")
    names = [n for n, a in ARCHITECTURES.items() if (not args.only or n in args.only)
             and (not args.family or a.family in args.family)]  # fmt: skip
    if not args.collect:
        sweep(names, args.work, args.threads, args.force, args.timeout)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(collect(args.work, args.threads), indent=1) + "\n")
    print(table(json.loads(args.out.read_text())))


if __name__ == "__main__":
    main()
