"""Learning the Boltzmann MRF of Zhu & Ghahramani (2002): clamped / unclamped expectations
(:mod:`.expectations`), the gradient steps (:mod:`.optimisation`) and the driver
(:mod:`.learning`)."""
