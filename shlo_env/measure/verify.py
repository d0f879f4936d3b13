"""Verification: does a candidate compute what the original computes, within its tolerance tier?

`Verifier` runs candidates through a runner (`shlo_env.execute.runners`) on the original's input sets
(its example inputs, if any, plus seeded random sets) and compares their outputs with the
original's. `escalate` is the order the comparisons are tried in, cheapest first:

1. bitwise equal on every set: verified EXACT (no reference is computed);
2. else the REASSOCIATE criterion (`shlo_env.measure.numerics.verify`) against float64 reference
   outputs of the original;
3. only if that fails, again with the original's own sensitivity (its float64 outputs on
   inputs moved by a few ulps): two more runs, so only when needed.

Input sets: a random set (never the user's example inputs) on which the original itself
gives a non-finite value in a float output (a Kalman covariance or a Lennard-Jones energy
that overflows on N(0,1) inputs) says nothing about a rewrite that reassociates, so it is
redrawn with the same seed by each of `REDRAWS` in turn: its float inputs scaled, then the
same draws' magnitudes (floats |x|, integers from 0: a batch-norm state's rsqrt of a random
negative variance, adam's square root of its second moment, a label taken as an index made
most of the zoo's train steps NaN, and a haiku ResNet's inference NaN everywhere). The first
draw on which every output of the original is finite replaces it (one more run of the
original per try), and the next set runs that draw first, without its N(0,1) draw. If none
is, the N(0,1) set stays, and the later sets are not redrawn: the original is then most likely
non-finite whatever the draw, and each try would only run it again. The scales are a decade
apart: at half scale the original can still sit on the edge of overflow, where a rewrite that
rounds differently overflows first (the Kalman filter's all-sites `small_dot_to_reduce`).
Scales come before magnitudes: a set of magnitudes does not test what a rewrite does to
negative values, and an overflow can end in NaN with no Inf, as a square root of a negative
draw does.

A set on which every float output of the original is NaN or Inf (and it has no other output)
compares nothing: a candidate agrees with it whatever it computes. When every set is such a
set, `check` verifies nothing (`Verifier.informative`).
The `Verifier` is the one place that decides the sets: the evaluator times on its set 0, and
`optimize` checks the winner on it; `optimize`'s check of a cached result redraws its one
random set the same way (`finite_redraw`).

Memory: the sets, the original's outputs on them and its float64 references are what a search
of a large model holds (a 136M-parameter model: about 0.5 GB per input set, in this process and
again in the worker). `search.schedule.Schedule.memory_bytes` bounds them, and `random_sets_within` cuts
the number of random sets to fit (at least one); `Verifier.release` frees them, and the
worker's copies, when the search ends.

The search's `Evaluator` and `Env.is_equivalent` use a `Verifier`. `optimize`'s in-process
checks and `shlo_env.testing` (a pattern author's property tests, on the reference interpreter
and stricter: an EXACT rewrite must be bitwise equal) apply the same rules of
`shlo_env.measure.numerics` to outputs they compute themselves.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from shlo_env.execute import runtime
from shlo_env.ir.hashing import dag_hash
from shlo_env.ir.program import Program
from shlo_env.measure.numerics import SENSITIVITY_ULPS, Comparison, Numerics, compare_outputs, is_floating, verify
from shlo_env.execute.runners import Runner

Outputs = list[np.ndarray]


class Draw(NamedTuple):
    """How a random set is redrawn (`runtime.random_inputs`): its floats scaled by `scale`, with
    `nonnegative` the draws' magnitudes, with `int_max` integers up to it only."""

    scale: float
    nonnegative: bool = False
    int_max: int | None = None

    @property
    def suffix(self) -> str:
        """The redrawn set's name ends with this."""
        return f"x{self.scale}" + ("+" if self.nonnegative else "") + (f"i{self.int_max}" if self.int_max else "")

    def inputs(self, specs, seed: int, draws: runtime.RandomDraws | None = None) -> list[np.ndarray]:
        """The set of `seed` drawn this way (from `draws`, that seed's, without drawing again)."""
        draws = draws if draws is not None else runtime.RandomDraws(specs, seed)
        return draws.inputs(self.scale, self.nonnegative, self.int_max)


# How a random set on which the original was not finite is redrawn, in turn: smaller scales
# first (exponentials, squares, growing recurrences overflow), then larger (a singularity at
# zero: the 1/r^12 of two Lennard-Jones particles drawn close together), then magnitudes,
# then magnitudes with integers 0 and 1 (the labels of a BERT two-class head).
REDRAWS = (Draw(0.1), Draw(0.01), Draw(10.0), Draw(1.0, nonnegative=True), Draw(0.1, nonnegative=True),
           Draw(1.0, nonnegative=True, int_max=1))

NOTHING_TO_COMPARE = ("the original's float outputs are NaN or Inf everywhere on every input set: "
                      "a candidate cannot be told apart from it")


def _nbytes(specs) -> int:
    return sum(int(np.prod(s.shape, dtype=np.int64)) * np.dtype(s.dtype).itemsize for s in specs)


def set_bytes(program: Program) -> int:
    """What one input set costs a search: its arrays twice (here and in the worker), the
    original's outputs on it, and two float64 versions of them (reference and sensitivity)."""
    out = _nbytes(program.out_specs)
    return 2 * _nbytes(program.in_specs) + out + 2 * 2 * out


def random_sets_within(program: Program, num_random: int, max_bytes: int | None) -> int:
    """How many of `num_random` random sets fit in `max_bytes` beside the example inputs (if
    any): at least one, so every candidate still meets a random set."""
    if max_bytes is None or num_random <= 1:
        return num_random
    per_set = max(1, set_bytes(program))
    examples = 1 if program.example_args is not None else 0
    return max(1, min(num_random, max_bytes // per_set - examples))


def all_finite(outputs: Outputs) -> bool:
    """No NaN or Inf in any float (or complex) output."""
    return all(bool(np.isfinite(o).all()) for o in map(np.asarray, outputs) if is_floating(o.dtype))


def escalate(outputs: Sequence[Outputs], originals: Sequence[Outputs], claimed: Numerics | str,
             references: Callable[[], list | None], sensitivities: Callable[[], list | None], *,
             reference_free_first: bool = False) -> Comparison:
    """The verification ladder: compare a candidate's outputs with the original's on every
    input set, in the order of the module docstring; `references()` and `sensitivities()` are
    called only when needed (each call may be asked again: callers cache). With
    `reference_free_first`, the tier's comparison without a reference is tried before any
    reference is asked for (`optimize`'s check of a cache hit, which computes references in
    its own process). The result's `tier` is the tier established (`ok` False: verified in no
    tier it may use). Every check of a candidate against the original goes through here: the
    search's `Verifier`, and `optimize`'s in-process checks."""
    exact = all(compare_outputs(g, o, Numerics.EXACT).ok for g, o in zip(outputs, originals))
    if not exact and reference_free_first:
        cmp = verify(outputs, originals, claimed)
        if cmp.ok:
            return cmp
    cmp = verify(outputs, originals, claimed, None if exact else references())
    if not cmp.ok and not exact:
        cmp = verify(outputs, originals, claimed, references(), sensitivities())
    return cmp


def informative(outputs: Outputs) -> bool:
    """Whether a comparison with these outputs of the original can fail: some output that is
    not a float, or some finite float value."""
    return any(not is_floating(o.dtype) or bool(np.isfinite(o).any()) for o in map(np.asarray, outputs))


def finite_redraw(specs, seed: int, run: Callable[[Draw, list[np.ndarray]], Outputs], first: Draw | None = None
                  ) -> tuple[list[np.ndarray], Outputs, Draw] | None:
    """The random set of `seed` redrawn by each of `REDRAWS` (`first` before the others) until
    `run(draw, arrays)` (the original's outputs on it) is all finite: (arrays, outputs, draw),
    or None if no draw is. Scales come first whatever the outputs: a Kalman filter's overflow
    ends in NaN and no Inf, as a square root of a negative draw does, and on magnitudes it
    sits at the edge of overflow, where a rewrite that rounds otherwise overflows first.
    The seed's draws are made once, and each redraw rescales them."""
    draws = runtime.RandomDraws(specs, seed)
    for draw in ([first] if first is not None else []) + [d for d in REDRAWS if d != first]:
        arrays = draw.inputs(specs, seed, draws)
        outputs = run(draw, arrays)
        if all_finite(outputs):
            return arrays, outputs, draw
    return None


class Verifier:
    """Checks programs against `original` through `runner`, on the example inputs (if any) plus
    `num_random` seeded random input sets (redrawn rescaled where the original overflows: see
    the module docstring). The original's outputs, float64 references and sensitivities are
    computed once, when first needed; reading `sets` or `keys` computes the outputs first,
    since they decide the sets.

    `disabled_passes` apply when running the original; `timeout` gives the `timeout_s` of each
    runner request (None: the runner's own). `max_bytes` bounds the memory the sets take
    (`random_sets_within`: fewer random sets for a large program; None: no bound).
    `release()` frees the sets and the original's outputs, here and in the runner.
    """

    def __init__(self, original: Program, runner: Runner, *, num_random: int = 3, seed: int = 0,
                 disabled_passes: tuple[str, ...] = (), timeout: Callable[[], float | None] = lambda: None,
                 max_bytes: int | None = None):
        num_random = random_sets_within(original, num_random, max_bytes)
        self.num_random = num_random
        self.original = original
        self.runner = runner
        self.disabled_passes = disabled_passes
        self.timeout = timeout
        self.text = original.text()
        self.seed = seed
        # the example inputs, if any, then the random sets: drawn by `originals()`, which decides
        # them (a set the original is not finite on is redrawn: its first draw is not needed)
        examples = [list(original.example_args)] if original.example_args is not None else []
        self._sets: list[list[np.ndarray] | None] = examples + [None] * num_random
        self._first_random = len(examples)
        # Input sets live in the runner under these names; the prefix keeps two verifiers
        # sharing one runner from replacing each other's sets (a name always holds the same
        # arrays: a redrawn set gets its own name).
        self._prefix = f"{dag_hash(original)}-{seed}-{num_random}"
        self._keys = [f"{self._prefix}/set{i}" for i in range(len(self._sets))]
        for key, arrays in zip(self._keys, examples):
            runner.set_inputs(key, arrays)
        self._originals: list[Outputs] | None = None
        self._draw: Draw | None = None  # the redraw that made the last redrawn set finite
        self._informative = True  # set with the original's outputs (`informative`)
        self._references: list | None = None
        self._sensitivities: list | None = None
        self._prefetch: threading.Thread | None = None

    @property
    def num_input_sets(self) -> int:
        return len(self._sets)

    @property
    def sets(self) -> list[list[np.ndarray]]:
        """The input sets, as decided (runs the original once on each, the first time)."""
        self.originals()
        return self._sets  # type: ignore[return-value]  # every set is drawn by now

    @property
    def keys(self) -> list[str]:
        """The runner's names of `sets`."""
        self.originals()
        return self._keys

    def _run_original(self, key: str) -> Outputs:
        return self.runner.run(self.text, key, self.disabled_passes, timeout_s=self.timeout())

    def _seed(self, i: int) -> int:
        """The seed random set i is drawn with (as `runtime.input_sets` would)."""
        return self.seed + i - self._first_random

    def _run_first_draw(self, i: int) -> Outputs:
        """Draw random set i as `runtime.input_sets` does (if not drawn yet), hand it to the
        runner and run the original on it."""
        if self._sets[i] is None:
            self._sets[i] = arrays = runtime.random_set(self.original, self._seed(i))
            self._keys[i] = f"{self._prefix}/set{i}"
            self.runner.set_inputs(self._keys[i], arrays)
        return self._run_original(self._keys[i])

    def originals(self) -> list[Outputs]:
        """The original's outputs on each input set (compiled with `disabled_passes`)."""
        if self._originals is None:
            outputs: list[Outputs] = []
            redraw = True
            for i, key in enumerate(self._keys):
                if i < self._first_random:
                    outputs.append(self._run_original(key))
                    continue
                if not redraw:
                    outputs.append(self._run_first_draw(i))
                    continue
                if self._draw is not None:
                    # a set before needed a redraw: this one takes the draw that worked first,
                    # since its N(0,1) draw would most likely fail the same way (one run less)
                    out = self._redraw(i, None)
                else:
                    out = self._run_first_draw(i)
                    if not all_finite(out):
                        out = self._redraw(i, out)
                # no draw gave finite outputs: the program most likely makes them whatever the
                # draw; redrawing the other sets would only run it again (a 4k-op train step:
                # 10 s of a 60 s budget)
                redraw = all_finite(out)
                outputs.append(out)
            self._originals = outputs
            self._informative = any(informative(o) for o in outputs)
        return self._originals

    def _redraw(self, i: int, outputs: Outputs | None) -> Outputs:
        """Replace random set i by the first redrawn set on which the original is finite
        (`finite_redraw`, after its N(0,1) `outputs`, or before running it when None); return
        the original's outputs on the set kept (its N(0,1) set's when no draw is finite)."""
        first_key = self._keys[i] if self._sets[i] is not None else None

        def run(draw: Draw, arrays: list[np.ndarray]) -> Outputs:
            key = f"{self._prefix}/set{i}{draw.suffix}"
            self.runner.set_inputs(key, arrays)
            self._keys[i] = key
            out = self._run_original(key)
            if not all_finite(out):
                self._drop([key])  # a 45 MB set the worker would otherwise hold to the end
            return out

        redrawn = finite_redraw(self.original.in_specs, self._seed(i), run, self._draw)
        if redrawn is None:
            if first_key is None:  # its first draw was never run: run it now
                self._sets[i] = None
                return self._run_first_draw(i)
            self._keys[i] = first_key
            return outputs if outputs is not None else self._run_original(first_key)
        if first_key is not None and first_key != self._keys[i]:
            self._drop([first_key])
        self._sets[i], outputs, self._draw = redrawn
        return outputs

    def _drop(self, keys: list[str]) -> None:
        drop = getattr(self.runner, "drop_inputs", None)
        if drop is not None:
            drop(keys)

    @property
    def informative(self) -> bool:
        """Whether some input set's outputs of the original can tell a candidate apart
        (`informative`): if none can, `check` verifies nothing."""
        self.originals()
        return self._informative

    def prefetch_references(self) -> None:
        """Start `references()` on a thread, so that their compile and runs overlap what the
        caller does meanwhile on the IR (a 4k-op train step's references take 9 s);
        `references()` waits for it. The runner must take requests from two threads
        (a `Worker` does: they take turns). A failure there is left to `references()` to meet
        again, in the caller's thread."""
        if self._references is not None or self._prefetch is not None:
            return
        keys = list(self.keys)

        def work() -> None:
            try:
                self._references = self._compute_references(keys)
            except Exception:  # noqa: BLE001 - references() computes them again and raises
                pass

        self._prefetch = threading.Thread(target=work, name="shlo-env-references", daemon=True)
        self._prefetch.start()

    def _join_prefetch(self) -> None:
        thread, self._prefetch = self._prefetch, None
        if thread is not None:
            thread.join()

    def references(self) -> list:
        """float64 outputs of the original on each input set (None where it cannot be widened)."""
        self._join_prefetch()
        if self._references is None:
            self._references = self._compute_references(self.keys)
        return self._references

    def _compute_references(self, keys: Sequence[str]) -> list:
        return [self.runner.reference(self.text, k, timeout_s=self.timeout()) for k in keys]

    def sensitivity(self, i: int):
        """float64 outputs of the original on input set i moved by a few ulps: how much the
        exact result itself moves under rounding-sized changes (see `shlo_env.measure.numerics`)."""
        if self._sensitivities is None:
            self._sensitivities = [None] * len(self.keys)
        if self._sensitivities[i] is None:
            self._sensitivities[i] = self.runner.reference(self.text, self.keys[i], timeout_s=self.timeout(),
                                                           perturb_ulps=SENSITIVITY_ULPS)
        return self._sensitivities[i]

    def sensitivities(self) -> list:
        return [self.sensitivity(i) for i in range(len(self.keys))]

    def release(self) -> None:
        """Free the input sets, the original's outputs and references, here and in the runner
        (a warm worker serves the next search; what this one verified on is not needed there).
        The verifier is not used afterwards."""
        self._join_prefetch()
        self._drop(list(self._keys))
        self._sets, self._originals, self._references, self._sensitivities = [], [], [], []

    def check(self, text: str, disabled_passes: Sequence[str], claimed: Numerics | str) -> Comparison:
        """Run the program `text` (compiled with `disabled_passes`) on every input set and
        compare it with the original (`escalate`). Raises `CandidateError` if it cannot run."""
        originals = self.originals()
        if not self.informative:
            return Comparison(False, Numerics.parse(claimed), detail=NOTHING_TO_COMPARE)
        outputs = [self.runner.run(text, key, disabled_passes, timeout_s=self.timeout()) for key in self.keys]
        return escalate(outputs, originals, claimed, self.references, self.sensitivities)


__all__ = ["NOTHING_TO_COMPARE", "REDRAWS", "Draw", "Verifier", "all_finite", "escalate", "finite_redraw",
           "informative", "random_sets_within",
           "set_bytes"]
