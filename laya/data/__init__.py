"""Data: datasets and preprocessing, image decoding, and per-layer hidden-state (feature) caches."""
