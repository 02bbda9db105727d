"""Device resolution, autocast and the torchrun placement rules (CUDA cases are simulated on CPU machines)."""

import pytest
import torch

from laya.model import devices
from laya.model.devices import autocast, check_precision, env_device, model_device, resolve_device, setup_distributed


def test_resolve_cpu_auto_and_errors(monkeypatch):
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(" CPU ") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == resolve_device(None) == torch.device("cpu")
    with pytest.raises(ValueError, match="CUDA is not available here.*--device cpu or auto"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="CUDA is not available"):
        resolve_device("cuda:0")
    with pytest.raises(ValueError, match="unknown device 'gpu'; expected auto, cpu, cuda or cuda:N"):
        resolve_device("gpu")
    with pytest.raises(ValueError, match="cuda:N with N a GPU index"):
        resolve_device("cuda:x")


def test_cuda_index_beyond_the_machine_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert resolve_device("auto") == torch.device("cuda", 0)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(ValueError, match=r"has 2 GPU\(s\): cuda:0..cuda:1"):
        resolve_device("cuda:2")


def test_env_device(monkeypatch):
    monkeypatch.setenv("LAYA_DEVICE", "cpu")
    assert env_device() == torch.device("cpu")
    monkeypatch.setenv("LAYA_DEVICE", "tpu")
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        env_device()


def test_bf16_autocast_runs_matmuls_in_bfloat16_on_cpu():
    x = torch.randn(4, 8)
    layer = torch.nn.Linear(8, 3)
    with autocast(torch.device("cpu"), "bf16"):
        assert layer(x).dtype == torch.bfloat16
        assert (x.double() @ x.double().T).dtype == torch.float64  # float64 decodes are left alone
    with autocast(torch.device("cpu"), "float32"):
        assert layer(x).dtype == torch.float32
    with pytest.raises(ValueError, match="precision must be one of"):
        check_precision("fp8")


def test_model_device():
    assert model_device(torch.nn.Linear(2, 2)) == torch.device("cpu")
    assert model_device(torch.nn.ReLU()) == torch.device("cpu")


def test_single_process_placement(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    place = setup_distributed("cpu")
    assert (place.rank, place.world, place.device, place.main) == (0, 1, torch.device("cpu"), True)


def test_torchrun_with_more_processes_than_gpus(monkeypatch):
    """Explicit cuda with too few GPUs, or a fixed cuda:N, is refused before any process group is joined."""
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "3")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    joined = []
    monkeypatch.setattr(devices.dist, "init_process_group", lambda **kw: joined.append(kw))
    with pytest.raises(ValueError, match="started 4 processes on this node but it has 2 GPU"):
        setup_distributed("cuda")
    with pytest.raises(ValueError, match="under torchrun: pass cuda or auto"):
        setup_distributed("cuda:1")
    assert joined == []
    # auto falls back to the CPU with gloo, and says so
    monkeypatch.setattr(devices.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(devices.dist, "get_rank", lambda: 3)
    monkeypatch.setattr(devices.dist, "get_world_size", lambda: 4)
    with pytest.warns(UserWarning, match="Falling back to the CPU with gloo"):
        place = setup_distributed("auto")
    assert joined == [{"backend": "gloo"}] and place.device == torch.device("cpu") and place.rank == 3


def test_release_memory_gives_the_c_heap_back(monkeypatch) -> None:
    """What a step freed goes back to the system: Python's cycles collected, glibc's free pages trimmed (on a C
    library without malloc_trim, nothing to do and no error)."""
    import ctypes

    from laya.model import devices

    trimmed: list[int] = []

    class Libc:
        def malloc_trim(self, pad: int) -> int:
            trimmed.append(pad)
            return 1

    monkeypatch.setattr(ctypes, "CDLL", lambda name: Libc())
    devices.release_memory("cpu")
    assert trimmed == [0]
    monkeypatch.setattr(ctypes, "CDLL", lambda name: (_ for _ in ()).throw(OSError(name)))
    devices.release_memory(None)  # no libc.so.6: nothing trimmed, nothing raised
