"""The network by its own units: what each residual unit reads out, where it looked, what it changes."""
