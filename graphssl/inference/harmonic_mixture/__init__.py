"""Fitting Zhu & Lafferty's (2005) harmonic mixtures: EM on the features, then the
graph-discriminative lambda step (:mod:`.fit`)."""
