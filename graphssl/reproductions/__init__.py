"""Reproductions of published tables, kept apart from the estimator API: Blum & Chawla's
(2001) Table 1 protocol (:mod:`.mincut_table1`) and the ID3 decision tree it compares against
(:mod:`.id3`). Notebooks and ``benchmarks/bench_mincut.py`` use them."""
