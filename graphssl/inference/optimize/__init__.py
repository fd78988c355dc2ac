"""Optimisers and closed-form solves: mean field (:mod:`.mean_field`), EM (:mod:`.em`), ICM
(:mod:`.icm`), k-means (:mod:`.kmeans`), max-flow (:mod:`.maxflow`), the harmonic-mixture
convex solve (:mod:`.harmonic_lambda`) and the GRF / LGC / Parzen / graph-kNN closed forms
with their linear solvers (:mod:`.baselines`); for graphs that come with node features, the
feature model's fit (:mod:`.logistic`), pseudo-likelihood learning of Potts potentials
(:mod:`.pseudo_likelihood`) and the feature-unary Potts CRF (:mod:`.feature_potts`)."""
