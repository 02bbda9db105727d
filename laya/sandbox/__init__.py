"""Sandboxed workers for untrusted checkpoints: uploaded and typed checkpoints load and run only here.

- :mod:`.protocol`: frames of JSON + raw bytes, tensors as safetensors (never pickle);
- :mod:`.child`: the worker process's entry point (no network, OS limits);
- :mod:`.serve`: the worker's request loop and its byte-capped model cache;
- :mod:`.pool`: the server side, a bounded pool with timeouts and idle release;
- :mod:`.info`: :class:`~laya.sandbox.info.ModelInfo`, what pages need of a loaded model.

This module imports nothing, so that :mod:`.child` can confine itself before torch is imported.
"""
