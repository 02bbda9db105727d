"""Command line: ``laya <command> ...`` (or ``python -m laya``); ``laya --help`` lists the commands.

One module per command or small group of commands registers its parser (``add_<command>(sub)``) and holds what
it runs (``cmd_<command>(args)``); the options several commands take are parent parsers in
:mod:`laya.cli.options`. ``train`` reads an optional ``--config file.yaml|json`` (the nested
:class:`~laya.training.train.TrainConfig` layout) and applies the flags given on top of it. Errors a user can fix
(missing dataset, bad checkpoint, bad config) print one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence

from laya.cli.attach import add_attach
from laya.cli.dashboard import add_dashboard, add_shapes
from laya.cli.depth import add_depth, add_exits, add_lens
from laya.cli.evaluate import add_evaluate, add_sample
from laya.cli.network import add_network
from laya.cli.options import Terminated
from laya.cli.patch import add_patch
from laya.cli.suite import add_benchmark, add_bundle, add_reproduce
from laya.cli.train import add_train, read_config_file, train_config_from_args

DESCRIPTION = (
    "LAYA: train and evaluate depth-aware classifier heads, run their depth analytics, and open them in the "
    "dashboard. Errors a user can fix print one line and exit with status 2."
)
#: the commands in the order ``laya --help`` lists them
COMMANDS = (add_train, add_lens, add_network, add_evaluate, add_benchmark, add_depth, add_exits, add_sample,
            add_shapes, add_patch, add_reproduce, add_bundle, add_dashboard, add_attach)  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    from laya import __version__

    parser = argparse.ArgumentParser(prog="laya", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"laya {__version__}")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return parser


def user_errors() -> tuple[type[BaseException], ...]:
    """The errors a user can fix: printed as one line, exit status 2 (imported once a command runs)."""
    from laya.data.datasets import DatasetNotFoundError
    from laya.data.images import ImageError
    from laya.extras import MissingExtraError
    from laya.model.checkpoint import CheckpointError
    from laya.training.lock import OutputLockedError

    return (
        CheckpointError,
        DatasetNotFoundError,
        ImageError,
        FileNotFoundError,
        ValueError,
        OutputLockedError,
        MissingExtraError,  # an optional package: its message is the install command
        OSError,  # a directory or unreadable file where a file was expected: a message, never a traceback
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Parse (no heavy import: ``--help`` and ``--version`` answer at once), then run the command."""
    args = build_parser().parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    errors = user_errors()
    try:
        args.func(args)
    except errors as error:  # under torchrun the process exits, and torchrun ends the others
        sys.stderr.flush()
        print(f"error{process_words()}: {error}", file=sys.stderr)
        return 2
    except Terminated as stop:  # what the command was writing has been removed on the way out
        print(f"{stop}{process_words()}: nothing half-written is left", file=sys.stderr)
        return 128 + signal.SIGTERM
    from laya.model.sharding import end_distributed

    end_distributed()
    return 0


def process_words() -> str:
    """`` (torchrun process r of W)`` under ``torchrun``, else nothing: which process an error comes from."""
    world = os.environ.get("WORLD_SIZE", "1")
    return f" (torchrun process {os.environ.get('RANK', '0')} of {world})" if world.isdigit() and int(world) > 1 else ""


__all__ = ["build_parser", "main", "read_config_file", "train_config_from_args", "user_errors"]
