"""Mutation tests: the exactness check of ``exactness.py`` (the one ``test_exactness.py``
passes the real kernels with) rejects a copy of each kernel with one injected fault."""

import pytest

from . import exactness as E
from . import mutants


@pytest.fixture(scope="module")
def main():
    model = E.main_model()
    return model, E.exact_statistics(model)


MUTANTS = {
    "logits_x0.97": lambda g: mutants.scaled_logits(0.97),
    "colour_class_skipped": lambda g: mutants.skip_colour(g),
    "stacked_colour_row_skipped": lambda g: mutants.skip_stacked_colour(g),
    "synchronous_updates": lambda g: mutants.synchronous(),
    "sw_bonds_1-exp(-0.97J)": lambda g: mutants.weak_bonds(0.97),
    "mh_without_hastings_ratio": lambda g: mutants.no_hastings(),
    "exchange_ratio_counts_the_field": lambda g: mutants.field_in_exchange(),
    "exchange_always_accepted": lambda g: mutants.always_exchange(),
}


@pytest.mark.parametrize("name", list(MUTANTS))
def test_exactness_check_rejects_fault(main, name):
    model, exact = main
    thin = 4 if name == "mh_without_hastings_ratio" else 1
    samples = E.run(MUTANTS[name](model.graph), model, seed=3, thin=thin)
    z = E.z_scores(samples, exact, model.n_classes)
    assert max(z.values()) >= E.Z_MAX, f"fault {name} passed the exactness check: {z}"
