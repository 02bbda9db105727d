"""laya.model.hooks: every hook of a recording removed however it ends, acting in its own thread only, holders
nesting; and no other module of ``laya`` registering a hook itself."""

import ast
import re
import threading
from pathlib import Path

import pytest
import torch
from torch import nn

from laya.model.backbones import BackboneConfig, build_backbone
from laya.model.hooks import (
    Hooks,
    forward_hook,
    forward_pre_hook,
    layer_tensor,
    probe_input,
    replacing_output,
    with_layer_tensor,
)

ROOT = Path(__file__).resolve().parents[2]
REGISTERS = re.compile(r"\bregister_\w*hook\s*\(")  # register_forward_hook(, register_full_backward_hook(, ...


class Fails(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("the forward failed")


def hook_count(module: nn.Module) -> int:
    return len(module._forward_hooks) + len(module._forward_pre_hooks)


def test_hooks_are_removed_when_the_forward_raises():
    net = nn.Sequential(nn.Linear(3, 3), Fails())
    seen: list[torch.Tensor] = []
    with pytest.raises(RuntimeError, match="the forward failed"), Hooks() as hooks:
        hooks.after(net[0], lambda m, a, out: seen.append(out))
        hooks.before(net[1], lambda m, a: seen.append(a[0]))
        hooks.before(net[1], lambda m, a, k: None, with_kwargs=True)
        assert hook_count(net[0]) == 1 and hook_count(net[1]) == 2
        net(torch.ones(2, 3))
    assert len(seen) == 2  # both ran before the failure
    assert hook_count(net[0]) == 0 and hook_count(net[1]) == 0
    assert hooks.handles == []


def test_release_removes_every_hook_and_can_be_repeated():
    linear = nn.Linear(2, 2)
    hooks = Hooks().after(linear, lambda m, a, out: None).before(linear, lambda m, a: None)
    assert hook_count(linear) == 2
    hooks.release()
    hooks.release()
    assert hook_count(linear) == 0


def test_hooks_act_in_the_thread_that_made_the_holder_only():
    linear = nn.Linear(2, 2)
    x = torch.ones(1, 2)
    mine: list[torch.Tensor] = []
    others: list[torch.Tensor] = []
    with torch.no_grad(), Hooks() as hooks:
        hooks.after(linear, lambda m, a, out: mine.append(out))
        hooks.before(linear, lambda m, a: mine.append(a[0]))
        thread = threading.Thread(target=lambda: others.append(linear(x)))
        thread.start()
        thread.join()
        assert mine == []  # the other thread's forward reached no hook
        own = linear(x)
    assert len(mine) == 2 and torch.equal(mine[0], x) and torch.equal(mine[1], own)
    assert torch.equal(others[0], own)


def test_a_replaced_output_is_seen_in_its_own_thread_only():
    torch.manual_seed(0)
    linear = nn.Linear(2, 3)
    x = torch.randn(4, 2)
    with torch.no_grad():
        clean = linear(x)
        with replacing_output(linear, torch.zeros(4, 3)):
            patched = linear(x)
            other: list[torch.Tensor] = []
            thread = threading.Thread(target=lambda: other.append(linear(x)))
            thread.start()
            thread.join()
        after = linear(x)
    assert torch.equal(patched, torch.zeros(4, 3))
    assert torch.equal(other[0], clean) and torch.equal(after, clean)
    assert hook_count(linear) == 0


def test_nested_holders_each_remove_their_own():
    linear = nn.Linear(2, 2)
    order: list[str] = []
    with torch.no_grad(), Hooks() as outer:
        outer.after(linear, lambda m, a, out: order.append("outer"))
        with Hooks() as inner:
            inner.after(linear, lambda m, a, out: order.append("inner"))
            inner.after(linear, lambda m, a, out: order.append("first"), prepend=True)
            linear(torch.ones(1, 2))
            assert order == ["first", "outer", "inner"]
        assert hook_count(linear) == 1  # the inner holder's two are gone, the outer's stays
        order.clear()
        linear(torch.ones(1, 2))
        assert order == ["outer"]
    assert hook_count(linear) == 0


def test_a_hook_for_the_modules_life_acts_in_every_thread_until_removed():
    linear = nn.Linear(2, 2).requires_grad_(False)
    x = torch.ones(1, 2)
    seen: list[object] = []
    pre = forward_pre_hook(linear, lambda m, a: seen.append("pre"))
    post = forward_hook(linear, lambda m, a, out: out * 0)
    thread = threading.Thread(target=lambda: seen.append(linear(x)))
    thread.start()
    thread.join()
    assert seen[0] == "pre" and torch.equal(seen[1], torch.zeros(1, 2))  # the other thread's forward ran both
    pre.remove()
    post.remove()
    assert linear(x).abs().sum() > 0 and len(seen) == 2 and hook_count(linear) == 0


def test_a_pre_hook_with_kwargs_replaces_the_input():
    linear = nn.Linear(2, 2, bias=False)
    with torch.no_grad(), Hooks() as hooks:
        hooks.before(linear, lambda m, args, kwargs: ((args[0] * 0,), kwargs), with_kwargs=True)
        assert torch.equal(linear(torch.ones(3, 2)), torch.zeros(3, 2))


def test_layer_tensor_and_its_replacement():
    t, u = torch.ones(2), torch.zeros(2)
    assert layer_tensor(t) is t and layer_tensor((t, "cache")) is t and layer_tensor([t]) is t
    assert layer_tensor(()) is None and layer_tensor("text") is None and layer_tensor(("text", t)) is None
    assert with_layer_tensor(t, u) is u
    replaced = with_layer_tensor((t, "cache", 3), u)
    assert replaced[0] is u and replaced[1:] == ("cache", 3)


def test_probe_input_is_a_zero_image_in_the_backbones_dtype():
    backbone = build_backbone(BackboneConfig(name="cnn", in_channels=3, input_size=16, widths=(4, 6))).double()
    x = probe_input(backbone)
    assert x.shape == (1, 3, 16, 16) and x.dtype == torch.float64 and not x.any()


def registrations(repo: Path) -> list[str]:
    """``path:line`` of each ``register_*hook(`` call in ``repo/laya``'s Python files but ``laya/model/hooks.py``."""
    found = []
    for path in sorted((repo / "laya").rglob("*.py")):
        name = path.relative_to(repo).as_posix()
        if name == "laya/model/hooks.py":
            continue
        found += [f"{name}:{n}" for n, line in enumerate(path.read_text().splitlines(), 1) if REGISTERS.search(line)]
    return found


def test_only_the_hooks_module_registers_hooks():
    assert len(list((ROOT / "laya").rglob("*.py"))) > 50, "laya/ not found"
    assert registrations(ROOT) == [], "register hooks through laya.model.hooks (Hooks, forward_hook, ...)"
    assert REGISTERS.search("m.register_forward_pre_hook(f)") and REGISTERS.search("m.register_full_backward_hook(f)")
    assert not REGISTERS.search("torch.autograd.graph.saved_tensors_hooks(pack, unpack)")


def test_the_hooks_module_imports_nothing_of_laya():
    """A leaf: every module may hook a network without an import circle."""
    tree = ast.parse((ROOT / "laya" / "model" / "hooks.py").read_text())
    imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    imported += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert "torch" in imported and [m for m in imported if m.split(".")[0] == "laya"] == []


def test_the_registration_check_can_fail(tmp_path):
    (tmp_path / "laya" / "model").mkdir(parents=True)
    (tmp_path / "laya" / "model" / "hooks.py").write_text("m.register_forward_hook(f)\n")
    (tmp_path / "laya" / "spatial.py").write_text("x = 1\nhandle = block.register_forward_pre_hook(keep)\n")
    assert registrations(tmp_path) == ["laya/spatial.py:2"]
