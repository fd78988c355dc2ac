"""Running many chains of a kernel: ``lax.scan`` inside ``vmap``, sharded across devices.

``sample_chains`` drives any :class:`~graphssl.inference.mcmc.kernels.Kernel`. Step ``t`` of chain
``c`` uses the key ``fold_in(chain_key[c], t)``, so the draws depend only on the seed and the
global step index: a run stopped after ``m`` draws and resumed with ``resume=samples`` gives
exactly the draws of an uninterrupted run, and chunking the scan (for the progress bar) does
not change them either.

Every retained draw also gets ``model.energy`` (computed once per draw, not per step, so
thinning saves its cost) and each chain keeps its lowest-energy draw: the MAP candidate of
Walder Sec. 5 ("the most likely state visited", here among the retained draws and the
starting state), refined by :func:`graphssl.inference.optimize.icm.iterated_conditional_modes`.

With ``checkpoint=folder`` the run survives its process: after every ``checkpoint_every``
draws the kernel state, chain keys, draws so far, MAP tracking and step count go to disk
(atomically; format in :mod:`graphssl.inference.mcmc.checkpoint`), and the same call started
again continues from there with the same draws.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from graphssl._device import concatenate, take, to_device
from graphssl.inference.mcmc import checkpoint as ckpt
from graphssl.inference.mcmc.kernels import (
    Kernel,
    check_model,
    info_dict,
    merge_kernel,
    prepared,
    split_kernel,
)
from graphssl.models.protocol import (
    PairwiseTables,
    conditional_logits_from_tables,
    pairwise_tables,
)
from graphssl.validation import is_whole

__all__ = [
    "Samples",
    "sample_chains",
    "label_energy",
    "label_marginals",
    "rao_blackwell_marginals",
    "rao_blackwell_chain_marginals",
    "storage_dtype",
]


class Samples(NamedTuple):
    """Output of :func:`sample_chains`.

    Attributes:
      labels: ``int8/int16[chains, draws, n]`` retained labels (after burn-in, every ``thin``).
      energy: ``float[chains, draws]`` energy of each retained state.
      stats: ``dict[str, [chains, draws]]`` move statistics: the fields of the kernel's
        ``info`` by name (:func:`~graphssl.inference.mcmc.kernels.info_dict`, as stored in
        checkpoints); with ``thin > 1`` the mean over the ``thin`` steps before the draw.
      final_state: batched kernel state after the last step (leading axis = chains).
      map_labels: ``int32[n]`` lowest-energy retained draw (or start) over all chains.
      map_energy: its energy.
      chain_map_labels: ``int32[chains, n]``; chain_map_energy: ``float[chains]``.
      chain_keys: per-chain PRNG keys (for resuming).
      n_steps: steps done per chain (burn-in included); burn_in, thin: the run's settings.
      n_classes: number of classes of the model.
    """

    labels: jax.Array
    energy: jax.Array
    stats: dict
    final_state: Any
    map_labels: jax.Array
    map_energy: jax.Array
    chain_map_labels: jax.Array
    chain_map_energy: jax.Array
    chain_keys: jax.Array
    n_steps: int
    burn_in: int
    thin: int
    n_classes: int


def storage_dtype(n_classes: int):
    """Smallest signed integer dtype holding labels ``0..n_classes-1`` (int8/int16/int32)."""
    if n_classes <= 127:
        return jnp.int8
    if n_classes <= 32767:
        return jnp.int16
    return jnp.int32


def _track_map(state, best_e, best_y, energy):
    better = energy < best_e
    return jnp.where(better, energy, best_e), jnp.where(better, state.labels, best_y)


def _window(d, start, n_burn, thin):
    """Global steps ``[begin, end)`` leading to draw ``d`` of a chunk; the chunk's first
    draw also runs the ``n_burn`` burn-in steps."""
    first = d == 0
    begin = start + jnp.where(first, 0, n_burn + d * thin)
    return begin, begin + jnp.where(first, n_burn + thin, thin)


def label_energy(model, state) -> jax.Array:
    """The default per-draw energy of :func:`sample_chains`: ``model.energy(state.labels)``."""
    return model.energy(state.labels)


# A chunk's draws are written into buffers of a bucketed length, so that runs of different
# lengths share one compiled program (see _draw_capacity).
MIN_DRAW_CAPACITY = 16
BUCKET_MAX_BYTES = 1 << 28  # above this many bytes of stored labels a chunk is not padded


def _draw_capacity(n_draws: int, bytes_per_draw: int) -> int:
    """The compiled length of a chunk of ``n_draws`` draws: at least ``MIN_DRAW_CAPACITY``,
    else the next of 2^k and 3 * 2^(k-1) (at most a third more than asked), unless the
    padded labels would pass ``BUCKET_MAX_BYTES`` (then ``n_draws`` itself). The number of
    draws was a static length of the chain program, and each new one compiled the whole
    kernel anew (the diffusion mixture's chain: 9-10 s at XLA level 0 on 120 nodes): a
    resumed run, a convergence check of another length, a progress bar's last chunk."""
    n_draws = int(n_draws)
    if n_draws <= MIN_DRAW_CAPACITY:
        capacity = MIN_DRAW_CAPACITY
    else:
        power = 1 << (n_draws - 1).bit_length()
        capacity = 3 * power // 4 if 3 * power // 4 >= n_draws else power
    return n_draws if capacity * bytes_per_draw > BUCKET_MAX_BYTES else capacity


def _run_fn(kernel, n_draws: int, thin: int, dtype, method: str = "vectorized",
            energy_fn=label_energy, batched_model: bool = False, bytes_per_draw: int = 0):
    """Jitted map over chains (``vmap``, or ``lax.map`` for ``method="sequential"``) of:
    ``n_burn`` (traced) burn-in steps, then ``n_draws`` draws ``thin`` steps apart. The
    kernel step is traced once (one ``while_loop`` body). The kernel's arrays are passed as
    arguments (:func:`~graphssl.inference.mcmc.kernels.split_kernel`), never embedded.
    The kernel's ``init`` is not part of the program (it runs before, in ``_initial_carry``)
    and is dropped from the cache key: a run resumed with a kernel that differs only in its
    start (the diffusion mixture's leave-one-out checkpoints: centres ``"self"`` for the
    first chunk, ``"random"`` for the resumed ones) reuses the first chunk's program, where it
    compiled the same program again (7-8 s at XLA level 0, 120 nodes). The number of draws
    is an argument of the program, its outputs buffers of :func:`_draw_capacity` draws
    (``bytes_per_draw``: the labels of one draw of every chain), cut back to ``n_draws`` on
    the host: runs of other lengths in the same bucket reuse the program."""
    if isinstance(kernel, Kernel):
        kernel = kernel._replace(init=None)
    arrays, static = split_kernel(kernel)
    capacity = _draw_capacity(n_draws, bytes_per_draw)
    run = _run_fn_static(static, capacity, thin, dtype, method, energy_fn, batched_model)
    count = np.int32(n_draws)

    def run_chunk(model, chain_keys, carry, start, n_burn):
        carry, (labels, energy, info) = run(arrays, model, chain_keys, carry, start, n_burn,
                                            count)
        cut = functools.partial(take, stop=int(n_draws), axis=1)
        return carry, (cut(labels), cut(energy), jax.tree_util.tree_map(cut, info))

    return run_chunk


@functools.lru_cache(maxsize=64)
def _run_fn_static(static, capacity: int, thin: int, dtype, method: str,
                   energy_fn=label_energy, batched_model: bool = False):
    def run(arrays, model, chain_key, carry, start, n_burn, n_draws):
        kernel = merge_kernel(arrays, static)
        step_model = prepared(kernel, model)  # once per run, outside the loops
        _, info0 = jax.eval_shape(
            lambda c: kernel.step(step_model, chain_key, c[0]), carry
        )
        zeros = jax.tree_util.tree_map(
            lambda s: jnp.zeros(s.shape, s.dtype if thin == 1 else jnp.float32), info0
        )

        def draw(c, d):
            begin, end = _window(d, start, n_burn, thin)

            def body(t, inner):
                state, acc = inner
                state, info = kernel.step(step_model, jax.random.fold_in(chain_key, t), state)
                if thin == 1:
                    acc = info
                else:
                    keep = t >= end - thin
                    acc = jax.tree_util.tree_map(
                        lambda a, v: a + jnp.where(keep, v.astype(jnp.float32), 0.0), acc, info
                    )
                return state, acc

            state, acc = jax.lax.fori_loop(begin, end, body, (c[0], zeros))
            energy = energy_fn(model, state)
            c = (state, *_track_map(state, c[1], c[2], energy))
            if thin > 1:
                acc = jax.tree_util.tree_map(lambda a: a / thin, acc)
            return c, (state.labels.astype(dtype), energy, acc)

        shapes = jax.eval_shape(lambda c: draw(c, 0)[1], carry)
        buffers = jax.tree_util.tree_map(
            lambda s: jnp.zeros((capacity, *s.shape), s.dtype), shapes)

        def record(d, inner):
            c, bufs = inner
            c, out = draw(c, d)
            bufs = jax.tree_util.tree_map(
                lambda b, o: jax.lax.dynamic_update_index_in_dim(b, o, d, 0), bufs, out)
            return c, bufs

        return jax.lax.fori_loop(0, n_draws, record, (carry, buffers))

    if method == "sequential":
        def each(arrays, model, keys, carry, start, n_burn, n_draws):
            if batched_model:  # one model per chain: map over it too
                return jax.lax.map(
                    lambda a: run(arrays, a[2], a[0], a[1], start, n_burn, n_draws),
                    (keys, carry, model))
            return jax.lax.map(lambda a: run(arrays, model, a[0], a[1], start, n_burn,
                                             n_draws), (keys, carry))

        return jax.jit(each)
    model_axis = 0 if batched_model else None
    return jax.jit(jax.vmap(run, in_axes=(None, model_axis, 0, 0, None, None, None)))


def _chain_method(method: str, n_chains: int) -> str:
    if method not in ("auto", "vectorized", "sequential"):
        raise ValueError(
            f"chain_method must be 'auto', 'vectorized' or 'sequential', got {method!r}"
        )
    if method != "auto":
        return method
    single_cpu = jax.local_device_count() == 1 and jax.default_backend() == "cpu"
    return "sequential" if single_cpu and n_chains > 1 else "vectorized"


@functools.lru_cache(maxsize=64)
def _init_fn(init_fn, with_labels: bool, energy_fn=label_energy, batched_model: bool = False):
    """Keyed by the kernel's ``init`` (shared by all label kernels: one compile for all)."""

    def init(model, key, labels):
        state = init_fn(model, key, labels if with_labels else None)
        return state, energy_fn(model, state), state.labels

    model_axis = 0 if batched_model else None
    return jax.jit(jax.vmap(init, in_axes=(model_axis, 0, 0 if with_labels else None)))


def _shard(tree, n_chains: int):
    """Place the chain axis across local devices when there are several and they divide it."""
    devices = jax.local_devices()
    if len(devices) < 2 or n_chains % len(devices):
        return tree
    mesh = jax.sharding.Mesh(np.asarray(devices), ("chains",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("chains"))
    return jax.device_put(tree, sharding)


def _chunks(total: int, size: int) -> list[int]:
    size = max(1, min(size, total)) if total else 1
    sizes = [size] * (total // size)
    if total % size:
        sizes.append(total % size)
    return sizes


def _check_run_args(n_chains, n_samples, burn_in, thin):
    for name, value, low in (("n_chains", n_chains, 1), ("n_samples", n_samples, 0),
                             ("burn_in", burn_in, 0), ("thin", thin, 1)):
        if not is_whole(value, low):
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def _check_key(key) -> None:
    """One PRNG key: ``jax.random.key(seed)`` (or a legacy ``uint32[2]`` ``PRNGKey``)."""
    if isinstance(key, jax.core.Tracer):
        return
    typed = isinstance(key, jax.Array) and jax.dtypes.issubdtype(key.dtype,
                                                                  jax.dtypes.prng_key)
    legacy = (isinstance(key, jax.Array | np.ndarray) and key.dtype == np.uint32
              and key.shape == (2,))
    if not ((typed and key.shape == ()) or legacy):
        raise ValueError(f"key: one PRNG key, jax.random.key(seed), got "
                         f"{type(key).__name__} {getattr(key, 'shape', '')}".rstrip()
                         + "; for several runs split it and call once per key, or pass "
                         "resume= to continue a run")


def _check_init_labels(init_labels, model) -> None:
    """Starting labels must be whole classes in ``0..q-1`` (a class 5 of a 2-class model
    gave a NaN MAP energy; 0.5 was truncated to 0). Traced labels are not checked."""
    if isinstance(init_labels, jax.core.Tracer):
        return
    values = np.asarray(init_labels)
    n_classes = int(getattr(model, "n_classes", 0) or 0)
    whole = values.dtype.kind in "iub" or (
        values.dtype.kind == "f" and np.all(np.isfinite(values)) and np.all(values % 1 == 0))
    if not whole or (values.size and (values.min() < 0 or (n_classes and
                                                           values.max() >= n_classes))):
        raise ValueError(f"init_labels: must be class indices in 0..{n_classes - 1}, got "
                         f"values in [{values.min() if values.size else '-'}, "
                         f"{values.max() if values.size else '-'}] of dtype {values.dtype}")


def _check_resume(kernel, model, resume, energy_fn, batched_model) -> None:
    """``resume`` must be a run of this kernel on this model: its classes, its chains' state
    (the kernel's state layout, leaf by leaf), the kernel's move statistics and the energy
    of its last draws under this model (a model of the same size but another beta or field
    joined the draws of two laws, and a Swendsen-Wang kernel after a Gibbs run failed late
    with a ``KeyError``). The layout is traced once per kernel and model shape and the
    energy compiled once (the diffusion mixture resumes its chains ~170 times a fit)."""
    fix = "resume with the kernel, model and batched_model the run was made with"
    if int(resume.n_classes) != int(model.n_classes):
        raise ValueError(f"resume: the run has {int(resume.n_classes)} classes, the model "
                         f"{int(model.n_classes)}; {fix}")
    n_chains = int(np.shape(resume.chain_keys)[0])
    try:
        layout, statistics = _chain_layout(kernel, model, n_chains, energy_fn, batched_model)
    except (TypeError, ValueError) as err:  # e.g. batched_model=True on one model
        raise ValueError(f"resume: this kernel cannot start chains on this model "
                         f"(batched_model={batched_model}: {str(err).splitlines()[0]}); "
                         f"{fix}") from None
    held = (resume.final_state, resume.chain_map_energy, resume.chain_map_labels)
    if _shape_signature(held) != layout:
        raise ValueError(f"resume: the run's chain state does not fit this kernel and model "
                         f"({type(resume.final_state).__name__} held); {fix}")
    if np.shape(resume.labels)[1] and statistics != frozenset(resume.stats):
        raise ValueError(f"resume: the run's move statistics {sorted(resume.stats)} are not "
                         f"this kernel's {sorted(statistics)}: another kernel made it; {fix}")
    if np.shape(resume.energy)[1] == 0:
        return
    energy = np.asarray(_chain_energies(energy_fn, batched_model)(model, resume.final_state))
    recorded = np.asarray(resume.energy)[:, -1]
    if not np.allclose(energy, recorded, rtol=1e-4, atol=1e-4, equal_nan=True):
        raise ValueError(f"resume: the run's last draws have energies {recorded[:3]} as "
                         f"recorded but {energy[:3]} under this model: it sampled another "
                         f"model (other beta, field or couplings); {fix}")


def _shape_signature(tree) -> tuple:
    """``(tree structure, leaf shapes)``: what a chain state's layout is compared by."""
    leaves, structure = jax.tree_util.tree_flatten(tree)
    return structure, tuple(np.shape(leaf) for leaf in leaves)


_LAYOUTS: dict = {}  # (kernel and energy described, model signature, n_chains, batched)


def _chain_layout(kernel, model, n_chains, energy_fn, batched_model):
    """``(layout of a fresh carry, names of the kernel's move statistics)``, traced (not
    compiled) once per kernel code, energy function and model shape (callers build a new
    kernel object per call: the key is their description, arrays by shape,
    :func:`graphssl.inference.mcmc.checkpoint._describe`)."""
    import json

    described = json.dumps(ckpt._describe((tuple(kernel), energy_fn), values=False),
                           sort_keys=True, default=str)
    key = (described, _shape_signature(model), n_chains, batched_model)
    cached = _LAYOUTS.get(key)
    if cached is not None:
        return cached
    fresh = jax.eval_shape(functools.partial(
        _initial_carry, kernel, model, jax.random.key(0), n_chains, None, energy_fn,
        batched_model))[1]
    axes = (0 if batched_model else None, None, 0)
    info = jax.eval_shape(jax.vmap(kernel.step, in_axes=axes), model, jax.random.key(0),
                          fresh[0])[1]
    result = (_shape_signature(fresh), frozenset(info_dict(info)))
    if len(_LAYOUTS) > 64:
        _LAYOUTS.clear()
    _LAYOUTS[key] = result
    return result


@functools.lru_cache(maxsize=32)
def _chain_energies(energy_fn, batched_model: bool):
    """``(model, states) -> energy per chain``, compiled (an eager ``vmap`` dispatched every
    operation of a long energy function on its own)."""
    return jax.jit(jax.vmap(energy_fn, in_axes=(0 if batched_model else None, 0)))


def _check_models(kernel, model, batched_model: bool, n_chains: int) -> None:
    """The kernel's host-side checks (e.g. an asymmetric pairwise table -> ValueError) on the
    model, or with ``batched_model`` on each chain's model: the stacked one is no model of
    its own (its beta ``[chains]`` against tables ``[chains, n, q]`` raised a bare
    broadcasting error)."""
    if not batched_model or kernel.check is None:
        check_model(kernel, model)
        return
    leaves = [leaf for leaf in jax.tree_util.tree_leaves(model) if np.ndim(leaf) > 0]
    if not leaves or any(np.shape(leaf)[0] != n_chains for leaf in leaves):
        sizes = sorted({np.shape(leaf)[0] for leaf in leaves})
        raise ValueError(f"batched_model: True needs one model per chain, every array of the "
                         f"model stacked on a leading axis of n_chains = {n_chains}; got "
                         f"leading sizes {sizes} (stack the models with jax.tree_util.tree_map("
                         "lambda *x: jnp.stack(x), *models), or pass batched_model=False)")
    for c in range(n_chains):
        check_model(kernel, jax.tree_util.tree_map(lambda leaf, c=c: leaf[c], model))


def _initial_carry(kernel, model, key, n_chains, init_labels, energy_fn=label_energy,
                   batched_model=False):
    init_key, chains_key = jax.random.split(key)
    chain_keys = jax.random.split(chains_key, n_chains)
    init_keys = jax.random.split(init_key, n_chains)
    if init_labels is None:
        return chain_keys, _init_fn(kernel.init, False, energy_fn, batched_model)(
            model, init_keys, None)
    _check_init_labels(init_labels, model)
    init_labels = jnp.asarray(init_labels, jnp.int32)
    if init_labels.shape == (model.n_nodes,):
        init_labels = jnp.broadcast_to(init_labels, (n_chains, model.n_nodes))
    if init_labels.shape != (n_chains, model.n_nodes):
        raise ValueError(
            f"init_labels must have shape ({model.n_nodes},) or ({n_chains}, "
            f"{model.n_nodes}), got {init_labels.shape}"
        )
    return chain_keys, _init_fn(kernel.init, True, energy_fn, batched_model)(
        model, init_keys, init_labels)


def sample_chains(
    kernel,
    model,
    key: jax.Array,
    n_chains: int = 4,
    n_samples: int = 1000,
    burn_in: int = 100,
    thin: int = 1,
    progress: bool = False,
    *,
    resume: Samples | None = None,
    init_labels: jax.Array | None = None,
    chunk_size: int | None = None,
    chain_method: str = "auto",
    energy=None,
    batched_model: bool = False,
    checkpoint=None,
    checkpoint_every: int | None = None,
) -> Samples:
    """Run ``n_chains`` chains of ``kernel`` on ``model``.

    Args:
      kernel: a ``Kernel(init, step)``.
      model: a protocol model (``energy``, ``n_classes``, ...); a pytree, so new parameter
        values reuse the compiled scan.
      key: PRNG key (ignored when resuming: the chains' own keys continue).
      n_chains, n_samples, burn_in, thin: ``burn_in`` steps are discarded, then every
        ``thin``-th of ``n_samples * thin`` steps is kept.
      progress: tqdm bar over chunks of ``chunk_size`` draws.
      resume: a previous result; continues its chains for ``n_samples`` more draws (same
        ``thin``; ``burn_in``/``n_chains``/``init_labels`` ignored) and returns all draws,
        identical to one uninterrupted run.
      init_labels: ``int[n]`` or ``int[chains, n]`` starting labels (default random).
      chunk_size: draws per compiled scan (default all of them, or ~1/20 with ``progress``).
      chain_method: ``"vectorized"`` (``vmap`` over chains; with several local devices
        dividing ``n_chains`` the chain axis is sharded across them), ``"sequential"``
        (``lax.map``: one chain after another inside one compiled call) or ``"auto"``:
        sequential on a single CPU device — there XLA's batched gathers/scatters halved the
        per-chain throughput of chromatic Gibbs (benchmarks/bench_samplers.py) — else
        vectorized. Both give the same draws (up to floating-point summation order).
      energy: ``(model, state) -> float``, the energy recorded per draw and minimised by the
        MAP tracking; default :func:`label_energy` (``model.energy(state.labels)``). A
        kernel whose state holds more than labels (the diffusion mixture's centres) passes
        the energy of its whole state. A plain function (it keys the compile cache).
      batched_model: the model's array leaves carry a leading axis of length ``n_chains``
        and chain ``c`` runs model ``c`` (many models, e.g. one per data split, in one
        compiled call). Give ``init_labels`` as ``int[chains, n]`` then.
      checkpoint: a folder (created if needed) for checkpoints of this run
        (:mod:`graphssl.inference.mcmc.checkpoint`): after every chunk of
        ``checkpoint_every`` draws (default ~1/10 of ``n_samples``; it caps ``chunk_size``)
        the run's state is written atomically, and a call with the same arguments and the
        same folder continues from the last one (after a kill, a crash or a Ctrl-C: the
        last checkpoint stays intact), giving the draws of an uninterrupted run. A finished
        run's folder returns its draws without sampling; more ``n_samples`` continue it; a
        folder written with other arguments raises ``ValueError``. Not with ``resume``.
    """
    energy_fn = label_energy if energy is None else energy
    _check_run_args(n_chains, n_samples, burn_in, thin)
    if chunk_size is not None and not is_whole(chunk_size, 1):
        raise ValueError(f"chunk_size must be None or an integer >= 1, got {chunk_size!r}")
    if resume is None:
        _check_key(key)
    n_total = resume.chain_keys.shape[0] if resume is not None else n_chains
    _check_models(kernel, model, batched_model, n_total)
    dtype = storage_dtype(model.n_classes)
    method = _chain_method(chain_method, n_total)
    outputs, done, fingerprint = [], 0, None
    if checkpoint is not None:
        if resume is not None:
            raise ValueError("checkpoint: continue a run from its checkpoint folder or from "
                             "resume=samples, not both")
        chunk_size = ckpt.chunk_size(n_samples, chunk_size, checkpoint_every)
        fingerprint = ckpt.fingerprint(
            kernel=kernel, model=model, key=key, n_chains=n_chains, burn_in=burn_in, thin=thin,
            dtype=dtype, init_labels=init_labels, energy_fn=energy_fn,
            batched_model=batched_model)
    if resume is not None:
        if thin != resume.thin and thin != 1:
            raise ValueError(f"thin={thin} differs from the resumed run's thin={resume.thin}")
        thin, burn_in = resume.thin, resume.burn_in
        held = np.shape(resume.chain_map_labels)[-1]
        if not batched_model and held != model.n_nodes:
            raise ValueError(f"resume: the run holds chains over {held} nodes, the model has "
                             f"{model.n_nodes}; resume a run of this model")
        _check_resume(kernel, model, resume, energy_fn, batched_model)
        chain_keys = resume.chain_keys
        n_chains = chain_keys.shape[0]
        carry = (resume.final_state, resume.chain_map_energy, resume.chain_map_labels)
        start, todo_burn = resume.n_steps, 0
    else:
        initial = functools.partial(_initial_carry, kernel, model, key, n_chains, init_labels,
                                    energy_fn, batched_model)
        stored = ckpt.open_run(checkpoint, fingerprint, initial, key, n_samples)
        if stored is None:
            chain_keys, carry = initial()
            start, todo_burn = 0, burn_in
        else:
            chain_keys, carry, start, done, outputs = stored
            todo_burn = 0
    chain_keys, carry = _shard((chain_keys, carry), n_chains)
    if chunk_size is None:
        chunk_size = max(1, -(-n_samples // 20)) if progress else max(n_samples, 1)
    from tqdm.auto import tqdm

    bar = tqdm(total=todo_burn + (n_samples - done) * thin, disable=not progress, unit="step")

    def save(out):  # with a checkpoint folder: the finished chunk, then the state counting it
        if checkpoint is not None:
            ckpt.save(checkpoint, fingerprint, outputs, out, n_steps=start,
                      chain_keys=chain_keys, carry=carry)

    sizes = _chunks(n_samples - done, chunk_size) if n_samples > done else []
    per_draw = int(np.prod(np.shape(carry[2]))) * np.dtype(dtype).itemsize  # labels, all chains
    if todo_burn and not sizes:  # burn-in only: run it through a one-draw chunk, drop the draw
        run = _run_fn(kernel, 1, 1, dtype, method, energy_fn, batched_model, per_draw)
        carry, _ = run(model, chain_keys, carry, start, todo_burn - 1)
        start, todo_burn = start + todo_burn, 0
        bar.update(start)
        save(None)
    for size in sizes:
        run = _run_fn(kernel, size, thin, dtype, method, energy_fn, batched_model, per_draw)
        carry, (labels, energy, info) = run(model, chain_keys, carry, start, todo_burn)
        out = (labels, energy, info_dict(info))  # statistics by name (the checkpoint's too)
        start += todo_burn + size * thin
        save(out)
        outputs.append(out)
        bar.update(todo_burn + size * thin)
        todo_burn = 0
    bar.close()
    return _assemble(outputs, carry, chain_keys, start, burn_in, thin, model, resume, n_chains)


def _assemble(outputs, carry, chain_keys, n_steps, burn_in, thin, model, resume, n_chains):
    dtype = storage_dtype(model.n_classes)
    # joined on the host where the draws are there (one compiled concatenate per new record
    # length otherwise: graphssl._device.concatenate)
    if outputs:
        labels = concatenate([o[0] for o in outputs], axis=1)
        energy = concatenate([o[1] for o in outputs], axis=1)
        stats = {k: concatenate([o[2][k] for o in outputs], axis=1) for k in outputs[0][2]}
    else:
        labels = to_device(np.zeros((n_chains, 0, model.n_nodes), dtype))
        energy = to_device(np.zeros((n_chains, 0), carry[1].dtype))
        stats = {}
    if resume is not None and resume.labels.shape[1]:
        labels = concatenate([resume.labels, labels], axis=1)
        energy = concatenate([resume.energy, energy], axis=1)
        stats = ({k: concatenate([resume.stats[k], v], axis=1) for k, v in stats.items()}
                 if stats else resume.stats)
    state, best_e, best_y = carry
    best = jnp.argmin(best_e)
    return Samples(
        labels=labels,
        energy=energy,
        stats=dict(stats),
        final_state=state,
        map_labels=best_y[best],
        map_energy=best_e[best],
        chain_map_labels=best_y,
        chain_map_energy=best_e,
        chain_keys=chain_keys,
        n_steps=int(n_steps),
        burn_in=int(burn_in),
        thin=int(thin),
        n_classes=int(model.n_classes),
    )


def label_marginals(samples, n_classes: int | None = None) -> jax.Array:
    """Posterior class marginals ``float[n, C]``: frequency of each label over chains × draws.

    ``samples`` is a :class:`Samples` or a label array ``[..., n]``.
    """
    labels = samples.labels if isinstance(samples, Samples) else jnp.asarray(samples)
    if n_classes is None:
        if not isinstance(samples, Samples):
            raise ValueError("n_classes is required when samples is a plain label array")
        n_classes = samples.n_classes
    flat = labels.reshape(-1, labels.shape[-1])
    if flat.shape[0] == 0:
        raise ValueError("samples holds no draws; run with n_samples >= 1")
    counts = [jnp.sum(flat == c, axis=0, dtype=jnp.int32) for c in range(n_classes)]
    return jnp.stack(counts, axis=1).astype(jnp.result_type(float)) / flat.shape[0]


def rao_blackwell_marginals(model, samples, n_classes: int | None = None) -> jax.Array:
    """Posterior class marginals ``float[n, C]``, Rao–Blackwellised: the mean over chains ×
    draws of each node's full conditional ``p(y_i = c | y_-i)`` (Gelfand & Smith 1990), one-hot
    at the clamped nodes.

    The conditional is the law's own (:func:`~graphssl.models.protocol.
    conditional_logits_from_tables` of ``model.pairwise_tables()``: Zhu & Ghahramani Eq. 25
    with the field), so the estimate has the expectation of :func:`label_marginals`'
    frequencies, ``E[1(y_i = c)] = E[p(y_i = c | y_-i)]``, and never a larger variance: a
    node whose conditional is spread keeps its spread instead of one sampled label per draw.
    It matters where the marginals are close to flat (a weak coupling far from the labels):
    measured on the Boltzmann MRF's default posterior against the frequencies of the same
    draws (``benchmarks/bench_boltzmann_defaults.py``, 5 splits, 10 labels a class):
    breast_cancer 0.875 -> 0.895, wine 0.939 -> 0.946; panel splits 0-2
    (``bench_defaults.py``): Digit1-10 75.4 -> 82.2 %.

    ``samples``: a :class:`Samples` or a label array ``[..., n]`` drawn from ``model``;
    ``n_classes`` (default: the model's ``q``) keeps the first classes. One ``lax.scan`` over
    the draws: memory ``O(n q)`` whatever their number, cost one conditional sweep per draw
    (measured: usps_full, 9298 nodes, 10 classes, 2000 draws: 3.5 CPU s of a 13.4 s
    ``PottsClassifier(inference="swendsen_wang")`` fit, 2-core CPU; batching draws with
    ``vmap`` inside the scan was not faster). With Potts' default beta the marginals are
    sharp and the two estimates agree within half a point (splits 0-2 of breast_cancer,
    USPS-10, COIL2-10, Digit1-10: +0.2, -0.1, +0.4, +0.1).
    """
    labels = samples.labels if isinstance(samples, Samples) else jnp.asarray(samples)
    flat = labels.reshape(-1, labels.shape[-1])  # stored dtype (int8 for q <= 127)
    if flat.shape[0] == 0:
        raise ValueError("samples holds no draws; run with n_samples >= 1")
    tables = pairwise_tables(model)
    if flat.shape[1] != tables.unary.shape[0]:
        raise ValueError(f"samples: draws over {flat.shape[1]} nodes, the model has "
                         f"{tables.unary.shape[0]}; pass the model the draws came from")
    observed = jnp.asarray(model.observed, dtype=bool)
    clamp_labels = jnp.asarray(model.labels, jnp.int32)
    marginals = _conditional_mean(tables.neighbor_index, tables.coupling, tables.unary,
                                  observed, clamp_labels, flat)
    q = marginals.shape[1] if n_classes is None else int(n_classes)
    return marginals[:, :q]


def rao_blackwell_chain_marginals(model, samples, n_classes: int | None = None) -> np.ndarray:
    """``float[chains, n, C]``: :func:`rao_blackwell_marginals` of each chain's draws alone
    (their mean over chains is the pooled estimate): the per-chain replicates from which
    :func:`~graphssl.inference.mcmc.statistics.label_stability` reads the Monte-Carlo error
    of each label."""
    labels = samples.labels if isinstance(samples, Samples) else jnp.asarray(samples)
    return np.stack([np.asarray(rao_blackwell_marginals(model, chain, n_classes))
                     for chain in labels])


@jax.jit
def _conditional_mean(neighbor_index, coupling, unary, observed, clamp_labels, draws):
    """Mean of ``softmax(conditional logits)`` over ``draws [m, n]``; one-hot where clamped."""
    tables = PairwiseTables(neighbor_index, coupling, unary)
    nodes = jnp.arange(draws.shape[1])
    dtype = jnp.result_type(coupling.dtype, unary.dtype)

    def add(total, draw):
        # one draw at a time to int32: the stored draws are not copied at 4 bytes a label
        logits = conditional_logits_from_tables(tables, draw.astype(jnp.int32), nodes)
        return total + jax.nn.softmax(logits.astype(dtype), axis=-1), None

    total, _ = jax.lax.scan(add, jnp.zeros(unary.shape, dtype), draws)
    q = unary.shape[1]
    clamped = jax.nn.one_hot(clamp_labels, q, dtype=dtype)
    return jnp.where(observed[:, None], clamped, total / draws.shape[0])
