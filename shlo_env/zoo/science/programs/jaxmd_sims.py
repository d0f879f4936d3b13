"""JAX MD: molecular dynamics with cell-list neighbour lists (dense and sparse formats), NVE and
Nose-Hoover NVT integrators, and FIRE energy minimisation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jax_md import energy, minimize, partition, quantity, simulate, space

from shlo_env.zoo.science.programs import program, rng


def _lattice(n_side: int, dim: int, box: float) -> np.ndarray:
    """Particles on a simple cubic (square) lattice filling the box."""
    g = (np.arange(n_side) + 0.5) * (box / n_side)
    return np.stack(np.meshgrid(*([g] * dim), indexing="ij"), axis=-1).reshape(-1, dim).astype(np.float32)


@program("jaxmd_lj_nve_neighbor_list", library="jax-md", kind="simulation",
         description="Lennard-Jones fluid (125 particles, 3-D periodic box, density 0.8, cutoff 2.5 sigma) "
                     "with a dense cell-list neighbour list rebuilt every step, velocity-Verlet NVE "
                     "(dt 0.005) for 100 steps in lax.fori_loop; positions are a lattice plus 0.05 tanh(input), "
                     "velocities drawn at kT 1 from the key input")
def lj_nve():
    n_side, dim, density = 5, 3, 0.8
    n = n_side ** dim
    box = float((n / density) ** (1 / dim))
    displacement, shift = space.periodic(box)
    neighbor_fn, energy_fn = energy.lennard_jones_neighbor_list(displacement, box, r_cutoff=2.5,
                                                                dr_threshold=0.5, format=partition.Dense)
    lattice = _lattice(n_side, dim, box)
    nbrs0 = neighbor_fn.allocate(lattice, extra_capacity=8)
    init_fn, apply_fn = simulate.nve(energy_fn, shift, dt=0.005)

    def fn(raw_dr, key):
        R = jnp.mod(lattice + 0.05 * jnp.tanh(raw_dr), box)
        nbrs = nbrs0.update(R)
        state = init_fn(key, R, kT=1.0, neighbor=nbrs)

        def body(i, carry):
            state, nbrs = carry
            state = apply_fn(state, neighbor=nbrs)
            return state, nbrs.update(state.position)

        state, nbrs = jax.lax.fori_loop(0, 100, body, (state, nbrs))
        e_pot = energy_fn(state.position, neighbor=nbrs)
        e_kin = quantity.kinetic_energy(momentum=state.momentum, mass=state.mass)
        return state.position, state.momentum, e_pot + e_kin, nbrs.did_buffer_overflow

    return fn, (rng(13).standard_normal((n, dim)).astype(np.float32), np.asarray(jr.key_data(jr.PRNGKey(0)))), {
        "particles": n, "dim": dim, "density": density, "box": round(box, 4), "r_cutoff": 2.5,
        "dr_threshold": 0.5, "format": "Dense", "neighbor_capacity": int(nbrs0.idx.shape[1]), "dt": 0.005,
        "steps": 100, "kT": 1.0}


@program("jaxmd_soft_sphere_nvt_sparse", library="jax-md", kind="simulation",
         description="bidisperse 2-D soft-sphere packing (256 particles, diameters 1 and 1.4) with a sparse "
                     "(pair list, segment-sum) neighbour list rebuilt every step, Nose-Hoover chain NVT "
                     "(kT 0.01, dt 0.01) for 100 steps in lax.fori_loop")
def soft_sphere_nvt():
    n_side, dim = 16, 2
    n = n_side ** dim
    sigma = np.where(np.arange(n) < n // 2, 1.0, 1.4).astype(np.float32)
    box = float(np.sqrt(np.sum(np.pi * (sigma / 2) ** 2) / 0.8))
    displacement, shift = space.periodic(box)
    species = jnp.asarray(np.arange(n) >= n // 2, dtype=jnp.int32)
    sigma_matrix = jnp.array([[1.0, 1.2], [1.2, 1.4]])
    neighbor_fn, energy_fn = energy.soft_sphere_neighbor_list(displacement, box, species=species,
                                                              sigma=sigma_matrix, dr_threshold=0.2,
                                                              format=partition.Sparse)
    lattice = _lattice(n_side, dim, box)
    nbrs0 = neighbor_fn.allocate(lattice, extra_capacity=64)
    init_fn, apply_fn = simulate.nvt_nose_hoover(energy_fn, shift, dt=0.01, kT=0.01)

    def fn(raw_dr, key):
        R = jnp.mod(lattice + 0.1 * jnp.tanh(raw_dr), box)
        nbrs = nbrs0.update(R)
        state = init_fn(key, R, neighbor=nbrs)

        def body(i, carry):
            state, nbrs = carry
            state = apply_fn(state, neighbor=nbrs)
            return state, nbrs.update(state.position)

        state, nbrs = jax.lax.fori_loop(0, 100, body, (state, nbrs))
        return state.position, energy_fn(state.position, neighbor=nbrs), nbrs.did_buffer_overflow

    return fn, (rng(14).standard_normal((n, dim)).astype(np.float32), np.asarray(jr.key_data(jr.PRNGKey(1)))), {
        "particles": n, "dim": dim, "packing_fraction": 0.8, "box": round(box, 4), "diameters": [1.0, 1.4],
        "format": "Sparse", "pairs_capacity": int(nbrs0.idx.shape[1]), "dt": 0.01, "kT": 0.01, "steps": 100,
        "thermostat": "Nose-Hoover chain"}


@program("jaxmd_morse_fire_minimize", library="jax-md", kind="optimization",
         description="FIRE energy minimisation (jax_md.minimize.fire_descent, dt_start 0.01) of a 64-particle "
                     "3-D Morse cluster, all pairs in free space (no neighbour list), 200 steps in "
                     "lax.fori_loop; start is a lattice plus 0.1 tanh(input)")
def morse_fire():
    n_side, dim = 4, 3
    displacement, shift = space.free()
    energy_fn = energy.morse_pair(displacement, sigma=1.0, epsilon=1.0, alpha=5.0)
    lattice = _lattice(n_side, dim, 4.0)
    init_fn, apply_fn = minimize.fire_descent(energy_fn, shift, dt_start=0.01, dt_max=0.05)

    def fn(raw_dr):
        state = init_fn(lattice + 0.1 * jnp.tanh(raw_dr))
        state = jax.lax.fori_loop(0, 200, lambda i, s: apply_fn(s), state)
        return state.position, energy_fn(state.position), jnp.max(jnp.abs(state.force))

    return fn, (rng(15).standard_normal((n_side ** dim, dim)).astype(np.float32),), {
        "particles": n_side ** dim, "dim": dim, "potential": "morse(sigma 1, epsilon 1, alpha 5)",
        "dt_start": 0.01, "dt_max": 0.05, "steps": 200}
