"""Sampler kernels: the ``Kernel(init, step)`` pair, composition, generic Metropolis–Hastings.

A kernel is a pair of pure functions (blackjax style, see DESIGN.md):

* ``init(model, key, labels=None) -> state``: a NamedTuple with at least ``labels: int32[n]``;
  random labels (clamped nodes at their observed labels) when ``labels`` is None;
* ``step(model, key, state) -> (state, info)``: one transition leaving ``p(Y) ∝ exp(-E(Y))``
  invariant; ``info`` is a NamedTuple of scalar move statistics, one class per kernel type
  (:class:`~graphssl.inference.mcmc.gibbs.GibbsInfo` (no fields),
  :class:`~graphssl.inference.mcmc.swendsen_wang.SwendsenWangInfo`, :class:`MHInfo`, ...).

Info field names are the statistics' names: a Metropolis–Hastings kernel named ``perm`` has
the fields ``perm_accept_prob`` and ``perm_accepted`` (:func:`mh_info_type`), so the infos of
composed kernels merge without clashes. :func:`compose` returns one flat NamedTuple
(``ComposedInfo``) holding the fields of its parts in order; a name already taken gets the
part's position appended (``accepted_2``). Drivers hand the statistics to users by name:
``sample_chains(...).stats`` and the numpyro adapter's ``stats`` are ``dict[str, array]``
built with :func:`info_dict` (``info._asdict()``) at that boundary, and the on-disk
checkpoints store them under the same names.

Kernels touch a state only through ``state.labels`` and ``state._replace(labels=...)``, so a
model-specific kernel may carry more fields (e.g. mixture-component assignments) and still be
composed with the generic ones.

A kernel that holds large arrays (a colouring, degree-bucket tables) keeps them as the bound
arguments of a ``jax.tree_util.Partial`` step, so the kernel is a pytree whose array leaves
drivers pass to ``jit`` as arguments (:func:`split_kernel`) instead of baking them into the
compiled program as constants (3 GB of constants at N = 10^7 made compilation time out).
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "Kernel",
    "LabelState",
    "MHInfo",
    "info_dict",
    "info_type",
    "merge_infos",
    "mh_info_type",
    "compose",
    "initial_labels",
    "label_init",
    "metropolis_hastings",
    "sample_categorical",
    "sample_categorical_columns",
    "clamp",
    "merge_kernel",
    "prepared",
    "split_kernel",
    "check_model",
    "pairwise_check",
]


class Kernel(NamedTuple):
    """``init(model, key, labels=None) -> state``; ``step(model, key, state) -> (state, info)``.

    ``prepare`` (optional): ``prepare(model) -> model'``, work a driver may do once before
    many steps on the same model (e.g. gather the couplings into the kernel's layout);
    ``model'`` still satisfies the model protocol, and ``step(model', ...)`` makes the same
    transition as ``step(model, ...)``. ``sample_chains`` calls it once per compiled run.

    ``check`` (optional): ``check(model) -> None``, host-side validation of a concrete model
    (raises ``ValueError`` naming the fix, e.g. an asymmetric pairwise table); drivers call
    it once before compiling (:func:`check_model`), ``init`` calls it when not traced.
    """

    init: Callable[..., Any]
    step: Callable[..., tuple[Any, tuple]]
    prepare: Callable[[Any], Any] | None = None
    check: Callable[[Any], None] | None = None


def check_model(kernel, model) -> None:
    """Run ``kernel.check(model)`` (if the kernel has one) unless the model is traced."""
    from graphssl.models.protocol import is_traced

    if kernel.check is not None and not is_traced(model):
        kernel.check(model)


def pairwise_check(model) -> None:
    """``check`` of the generic pairwise kernels: the model has ``pairwise_tables()`` and
    they describe law (P) (:func:`graphssl.models.protocol.check_pairwise_tables`)."""
    from graphssl.models.protocol import PairwiseLabelModel, check_pairwise_tables

    if not isinstance(model, PairwiseLabelModel):
        raise ValueError(
            f"model: {type(model).__name__} has no pairwise_tables(); the generic Gibbs, "
            "Swendsen-Wang and ICM code samples pairwise label models only "
            "(graphssl.models.protocol.PairwiseLabelModel); use the model's own kernels")
    check_pairwise_tables(model)


def pairwise_init(model, key: jax.Array, labels: jax.Array | None = None) -> LabelState:
    """``init`` of the generic pairwise kernels: :func:`pairwise_check` when the model is
    concrete, then :func:`label_init`."""
    from graphssl.models.protocol import is_traced

    if not is_traced(model):
        pairwise_check(model)
    return label_init(model, key, labels)


def prepared(kernel, model):
    """``kernel.prepare(model)`` when the kernel has one, else ``model``."""
    return model if kernel.prepare is None else kernel.prepare(model)


class LabelState(NamedTuple):
    """State of the generic label samplers: ``labels int32[n]``."""

    labels: jax.Array


def clamp(model, labels: jax.Array) -> jax.Array:
    """Put clamped nodes back at their observed labels (``model.observed``/``model.labels``)."""
    observed = jnp.asarray(model.observed, dtype=bool)
    return jnp.where(observed, jnp.asarray(model.labels, labels.dtype), labels)


def uniform_labels(key: jax.Array, shape: tuple[int, ...], n_classes: int) -> jax.Array:
    """``int32[shape]`` labels uniform over ``0..n_classes-1``, from one uniform draw each.

    For draws made outside ``jit`` (starting states of a host loop): each new shape compiles
    its own program, and ``jax.random.randint``'s (two bit draws and integer range
    arithmetic) compiled in 1.1 s on a 2-core CPU against 0.16 s for ``uniform``
    (shape (3, 4, 150), x64 on). ``floor(u C)`` with ``u`` in [0, 1) is uniform over the
    classes up to float rounding (capped at ``C - 1``)."""
    u = jax.random.uniform(key, shape, dtype=jnp.float32)
    return jnp.minimum(jnp.floor(u * n_classes), n_classes - 1).astype(jnp.int32)


def initial_labels(model, key: jax.Array, labels: jax.Array | None = None) -> jax.Array:
    """Starting labels: ``labels`` if given, else uniform over classes; clamped nodes fixed."""
    if labels is None:
        labels = jax.random.randint(key, (model.n_nodes,), 0, model.n_classes, dtype=jnp.int32)
    else:
        labels = jnp.asarray(labels, dtype=jnp.int32)
        if labels.shape != (model.n_nodes,):
            raise ValueError(
                f"labels must have shape ({model.n_nodes},), got {labels.shape}; pass one "
                "starting label per node or None for a random start"
            )
    return clamp(model, labels)


def label_init(model, key: jax.Array, labels: jax.Array | None = None) -> LabelState:
    """``init`` shared by the generic label kernels."""
    return LabelState(labels=initial_labels(model, key, labels))


def sample_categorical(key: jax.Array, logits: jax.Array) -> jax.Array:
    """One draw per row of ``logits [..., q]`` by inverse CDF (one uniform per row).

    Cheaper than Gumbel-max (``q`` uniforms per row); exact up to floating-point rounding of
    the cumulative sum. Log-space safe: logits are shifted by their row maximum first.
    """
    shifted = logits - jnp.max(logits, axis=-1, keepdims=True)
    cdf = jnp.cumsum(jnp.exp(shifted), axis=-1)
    u = jax.random.uniform(key, logits.shape[:-1], dtype=cdf.dtype) * cdf[..., -1]
    draw = jnp.sum((cdf <= u[..., None]).astype(jnp.int32), axis=-1)
    return jnp.minimum(draw, logits.shape[-1] - 1)


def sample_categorical_columns(key: jax.Array, logits: jax.Array) -> jax.Array:
    """One draw per column of class-major ``logits [q, m]`` by inverse CDF, ``int32[m]``.

    Same law as :func:`sample_categorical` on ``logits.T`` (one uniform per column, shifted
    by the column maximum so large logits never overflow), but the cumulative sum is
    unrolled over the ``q`` rows: every operation is elementwise over the ``m`` columns, so
    it fuses and vectorises on CPU (``jnp.cumsum`` lowers to a windowed reduction there).
    ``draw = #{c < q - 1 : e_0 + ... + e_c <= u}``, ``u ~ U[0, sum_c e_c)``,
    ``e_c = exp(logits_c - max)``.
    """
    q = logits.shape[0]
    e = jnp.exp(logits - jnp.max(logits, axis=0))
    cums = [e[0]]
    for c in range(1, q):
        cums.append(cums[-1] + e[c])
    u = jax.random.uniform(key, logits.shape[1:], dtype=e.dtype) * cums[-1]
    draw = jnp.zeros(logits.shape[1:], jnp.int32)
    for cum in cums[:-1]:
        draw = draw + (cum <= u).astype(jnp.int32)
    return draw


@functools.cache
def info_type(typename: str, fields: tuple[str, ...]) -> type:
    """The NamedTuple class ``typename`` with ``fields`` (statistic names, valid Python
    identifiers). One class per ``(typename, fields)``: kernels built at different times
    return infos of the same type (same pytree structure, so compiled programs are reused),
    and instances pickle (:func:`_rebuild_info`)."""
    cls = collections.namedtuple(typename, fields, module=__name__)
    cls.__reduce__ = lambda self: (_rebuild_info, (typename, fields, tuple(self)))
    return cls


def _rebuild_info(typename, fields, values):
    return info_type(typename, tuple(fields))(*values)


def mh_info_type(name: str = "mh") -> type:
    """Info class of a Metropolis–Hastings kernel named ``name`` (``MHInfo``):
    ``{name}_accept_prob`` (the acceptance probability of the step's proposal) and
    ``{name}_accepted`` (bool, whether it was taken)."""
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
        raise ValueError(f"name: a Python identifier not starting with '_' (it prefixes the "
                         f"info fields), got {name!r}")
    return info_type("MHInfo", (f"{name}_accept_prob", f"{name}_accepted"))


MHInfo = mh_info_type("mh")
MHInfo.__doc__ = ("Info of :func:`metropolis_hastings` with the default ``name='mh'``: "
                  "``mh_accept_prob``, ``mh_accepted``; other names: :func:`mh_info_type`.")


def _info_fields(info) -> list[tuple[str, Any]]:
    if isinstance(info, tuple) and hasattr(info, "_fields"):
        return list(zip(info._fields, info, strict=True))
    if isinstance(info, Mapping):  # kernels written before infos were NamedTuples
        return list(info.items())
    raise TypeError(f"info: a kernel's step must return (state, info) with info a NamedTuple "
                    f"of move statistics (an empty one if it records none), got "
                    f"{type(info).__name__}")


def info_dict(info) -> dict:
    """``{name: value}`` of a kernel's info (``info._asdict()``; a mapping is copied): the
    form in which drivers report move statistics (``Samples.stats``)."""
    return dict(_info_fields(info))


def merge_infos(infos) -> tuple:
    """One ``ComposedInfo`` NamedTuple with the fields of ``infos`` in order; a name already
    taken gets the part's position appended (``{name}_{k}``)."""
    names, values = [], []
    for k, info in enumerate(infos):
        for name, value in _info_fields(info):
            names.append(name if name not in names else f"{name}_{k}")
            values.append(value)
    return info_type("ComposedInfo", tuple(names))(*values)


def split_kernel(kernel) -> tuple[list, tuple]:
    """``(arrays, static)``: the kernel's array leaves (to pass to ``jit`` as arguments) and
    the rest (functions, tree structure; hashable, a cache key). :func:`merge_kernel` inverts
    it. A kernel of plain closures has no array leaves: ``arrays == []``."""
    leaves, treedef = jax.tree_util.tree_flatten(kernel)
    is_array = [isinstance(leaf, (jax.Array, np.ndarray)) for leaf in leaves]
    arrays = [leaf for leaf, a in zip(leaves, is_array, strict=True) if a]
    rest = tuple(None if a else leaf for leaf, a in zip(leaves, is_array, strict=True))
    return arrays, (treedef, rest)


def merge_kernel(arrays, static) -> Kernel:
    """The kernel :func:`split_kernel` took apart (``arrays`` may be tracers inside ``jit``)."""
    treedef, rest = static
    it = iter(arrays)
    return jax.tree_util.tree_unflatten(treedef, [next(it) if x is None else x for x in rest])


def _compose_step(steps, model, key, state):
    infos = []
    for step, sub in zip(steps, jax.random.split(key, len(steps)), strict=False):
        state, info = step(model, sub, state)
        infos.append(info)
    return state, merge_infos(infos)


def compose(*kernels: Kernel) -> Kernel:
    """Apply ``kernels`` in order within one step (each leaves the target invariant, so does
    the product). ``init`` is the first kernel's; the info is :func:`merge_infos` of the
    parts' infos: one ``ComposedInfo`` NamedTuple of their fields (a clashing name gets the
    kernel's position appended)."""
    if not kernels:
        raise ValueError("compose needs at least one kernel, e.g. compose(gibbs, perm)")
    steps = tuple(kernel.step for kernel in kernels)
    prepares = tuple(kernel.prepare for kernel in kernels if kernel.prepare is not None)
    prepare = jax.tree_util.Partial(_compose_prepare, prepares) if prepares else None
    checks = tuple(dict.fromkeys(k.check for k in kernels if k.check is not None))
    check = jax.tree_util.Partial(_compose_check, checks) if checks else None
    return Kernel(kernels[0].init, jax.tree_util.Partial(_compose_step, steps), prepare, check)


def _compose_check(checks, model):
    for check in checks:
        check(model)


def _compose_prepare(prepares, model):
    for prepare in prepares:  # each wraps the last: every kernel finds its own preparation
        model = prepare(model)
    return model


def _default_log_density(model, state) -> jax.Array:
    return -model.energy(state.labels)


def metropolis_hastings(
    propose: Callable[[Any, jax.Array, Any], tuple[Any, jax.Array]],
    *,
    log_density: Callable[[Any, Any], jax.Array] = _default_log_density,
    rule: str = "metropolis",
    name: str = "mh",
) -> Kernel:
    """A Metropolis–Hastings kernel from a proposal.

    Args:
      propose: ``(model, key, state) -> (proposed_state, log_q_ratio)`` with
        ``log_q_ratio = log q(state | proposed) - log q(proposed | state)`` (0 if symmetric).
        Proposals that break clamping get log density ``-inf`` when ``log_density`` says so.
      log_density: ``(model, state) -> log p(state)`` up to a constant; default ``-energy``.
      rule: ``"metropolis"``: accept with ``min(1, r)``; ``"barker"``: with ``r / (1 + r)``
        (Zhu & Ghahramani Sec. 3.3), where ``r = p(x') q(x|x') / (p(x) q(x'|x))``. Both satisfy
        detailed balance; Metropolis accepts at least as often (Peskun ordering).
      name: prefix of the info fields ``{name}_accept_prob``, ``{name}_accepted``
        (info type :func:`mh_info_type` ``(name)``; :class:`MHInfo` for ``"mh"``).
    """
    if rule not in ("metropolis", "barker"):
        raise ValueError(f"rule must be 'metropolis' or 'barker', got {rule!r}")
    info = mh_info_type(name)

    def step(model, key, state):
        key_prop, key_acc = jax.random.split(key)
        proposed, log_q_ratio = propose(model, key_prop, state)
        log_r = log_density(model, proposed) - log_density(model, state) + log_q_ratio
        log_r = jnp.where(jnp.isnan(log_r), -jnp.inf, log_r)
        if rule == "metropolis":
            accept_prob = jnp.exp(jnp.minimum(log_r, 0.0))
        else:
            accept_prob = jax.nn.sigmoid(log_r)
        accepted = jax.random.uniform(key_acc, dtype=accept_prob.dtype) < accept_prob
        new_state = jax.tree_util.tree_map(
            lambda a, b: jnp.where(accepted, a, b), proposed, state
        )
        return new_state, info(accept_prob, accepted)

    return Kernel(label_init, step)
