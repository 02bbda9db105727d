"""The model: backbones that expose every layer, layer-aggregating heads, the classifier that joins them,
and self-describing checkpoints."""
