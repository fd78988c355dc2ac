"""Models as numpyro programs: label-field distributions (:mod:`.fields`) and the papers'
generative stories written with them (:mod:`.programs`). Inference over these programs is in
:mod:`graphssl.inference.mcmc.numpyro_gibbs`."""

from graphssl.models.numpyro.fields import (
    EvidenceModel,
    LabelField,
    MixtureClassField,
    PolyaCentres,
    PottsField,
    default_pairs,
    record_label_statistics,
    with_evidence,
)
from graphssl.models.numpyro.programs import (
    boltzmann_program,
    diffusion_mixture_program,
    harmonic_mixture_program,
    hidden_potts_program,
    potts_program,
)

__all__ = [
    "EvidenceModel",
    "LabelField",
    "MixtureClassField",
    "PolyaCentres",
    "PottsField",
    "boltzmann_program",
    "default_pairs",
    "diffusion_mixture_program",
    "harmonic_mixture_program",
    "hidden_potts_program",
    "potts_program",
    "record_label_statistics",
    "with_evidence",
]
