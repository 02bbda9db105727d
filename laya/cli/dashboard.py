"""``laya dashboard`` (start the dashboard) and ``laya shapes`` (the tutorial's synthetic ImageFolder)."""

from __future__ import annotations

import argparse
from pathlib import Path


def cmd_shapes(args: argparse.Namespace) -> None:
    from laya.data.synthetic import SHAPES, make_shapes

    root = make_shapes(args.out, args.train, args.test, args.size, args.seed)
    print(f"{len(SHAPES)} classes ({', '.join(SHAPES)}) x {args.train} train + {args.test} test images of "
          f"{args.size} px -> {root}")  # fmt: skip


def cmd_dashboard(args: argparse.Namespace) -> None:
    from laya.dashboard import listen_address, run

    status = run(args.models, args.port, listen_address(args.address, args.bind_all), args.allow_import)
    if status:
        raise SystemExit(status)


def add_shapes(sub: argparse._SubParsersAction) -> None:
    """Register ``shapes``."""
    g = sub.add_parser("shapes", help="write a small synthetic ImageFolder (coloured shapes) for the tutorial")
    g.add_argument("out", help="folder to write (train/<class>/*.png, test/<class>/*.png)")
    g.add_argument("--train", type=int, default=100, help="training images per class")
    g.add_argument("--test", type=int, default=40, help="test images per class")
    g.add_argument("--size", type=int, default=64, help="image side in px")
    g.add_argument("--seed", type=int, default=0)
    g.set_defaults(func=cmd_shapes)


def add_dashboard(sub: argparse._SubParsersAction) -> None:
    """Register ``dashboard``."""
    s = sub.add_parser("dashboard", help="start the dashboard (the same app as streamlit run app.py in a checkout)")
    s.add_argument("--models", type=Path,
                   help="folder of checkpoints (default: $LAYA_MODELS, else ./models, else the demo that ships with laya)")  # fmt: skip
    s.add_argument("--port", type=int, default=8501, help="HTTP port (default 8501)")
    s.add_argument("--address", help="interface to listen on (default: 127.0.0.1, this machine only)")
    s.add_argument("--bind-all", action="store_true",
                   help="share the dashboard on every network interface (anyone who reaches this machine can open it)")  # fmt: skip
    s.add_argument(
        "--allow-import",
        action="store_true",
        help="wrapped-module checkpoints in --models may import the code path they record (never uploads)",
    )
    s.set_defaults(func=cmd_dashboard)


__all__ = ["add_dashboard", "add_shapes", "cmd_dashboard", "cmd_shapes"]
