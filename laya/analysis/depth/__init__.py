"""Acting on depth: what each layer alone predicts (:mod:`~laya.analysis.depth.readouts`), the per-layer lens
built on it (:mod:`~laya.analysis.depth.layer_lens`; the network's own logit and tuned lens is
:mod:`laya.analysis.network.lens`), early exit (:mod:`~laya.analysis.depth.exits`, measured end to end by
:mod:`~laya.analysis.depth.measured`), layer pruning and truncated models (:mod:`~laya.analysis.depth.pruning`),
error and OOD detection (:mod:`~laya.analysis.depth.detection`). Depth analytics of a checkpoint reads a seeded
subset of its splits (:mod:`~laya.analysis.depth.data`), fits on the training split
(:mod:`~laya.analysis.depth.fit`), writes ``depth.json`` (:mod:`~laya.analysis.depth.report`) and analyses one input
(:mod:`~laya.analysis.depth.input_depth`)."""
