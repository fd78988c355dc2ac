"""Exact inference by enumeration on graphs small enough to list every labelling: the
reference every sampler is tested against (:mod:`.enumeration`)."""
