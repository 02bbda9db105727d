"""Analyses of a trained classifier. The two kinds of explanation are two subpackages: a head over the layers it
reads (:mod:`laya.analysis.head`: α, leave-one-layer-out, attributions, exact maps) and the network by its own units
(:mod:`laya.analysis.network`: skip and resample, lens, Grad-CAM). Beside them: depth analytics, dataset-level
evaluation and reports, statistics, patching and the checks of map methods."""
