"""Models: energies and generative densities over node labels (no inference code here)."""
