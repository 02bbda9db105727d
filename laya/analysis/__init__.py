"""Analyses of a trained classifier. The two kinds of explanation are two subpackages: a head over the layers it
reads (:mod:`laya.analysis.head`: α, leave-one-layer-out, attributions, exact maps) and the network by its own units
(:mod:`laya.analysis.network`: skip and resample, lens, Grad-CAM); acting on depth is the third
(:mod:`laya.analysis.depth`: readouts, the heads' layer lens, early exit, pruning, detection). Beside them:
dataset-level evaluation and reports, statistics, strict JSON values, patching and the checks of map methods."""
