"""Training: the training loop, the paper's settings, multi-seed suites and bundling for the dashboard."""
