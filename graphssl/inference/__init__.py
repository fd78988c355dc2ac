"""Inference: samplers and optimisers that know a model only through its protocol."""
