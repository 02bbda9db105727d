"""Analyses of a trained classifier: layer ablation, attributions, faithfulness, depth profiles,
dataset-level evaluation and reports, single-input explanations."""
