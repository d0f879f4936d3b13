"""What the search measured, per rewrite of the returned program and per hot kernel of the
original: the records `report.explain()` prints (`SearchSummary.rewrites`, `.hotspots`,
`.roofline`). Read from the search's caches when it ends: nothing is compiled or timed again.

- **Per rewrite taken** (one record per pattern per step of the decision path): the sites
  and choices, the user's lines its new ops carry (`shlo_env.ir.locations`), the share of the
  original's profiled kernel time in the kernels its sites touch (when the state it was taken
  from was profiled), and its contribution as measured: the ratio of a candidate that took it
  alone at the same sites against the state it was taken from; else the regions' ratios the
  regional strategy measured at those sites; else the ratio of the whole step it was part of.
- **Hot kernels** of the original (when a profile was taken): share and time, the user's
  lines of the ops they hold, and the patterns that matched there with the best each measured
  (on the whole program or on its region) or why it has no timing.
- **Roofline**: the original's time against `flops / peak + bytes / bandwidth` when XLA's cost
  analysis and the device's peak rates are known (`shlo_env.measure.roofline`; on CPU only
  when set in `SHLO_ENV_PEAK_FLOPS` / `SHLO_ENV_PEAK_BANDWIDTH`).
"""

from __future__ import annotations

import math
from typing import Any

from shlo_env.ir.locations import location_sources, rewrite_sources, source_line
from shlo_env.ir.program import ir_scope
from shlo_env.rewrite.driver import walk_ops

TOP_KERNELS = 5  # hot kernels recorded
LINES_PER_ENTRY = 3  # user's lines kept per rewrite or kernel


def path_steps(ctx, key: str) -> list[tuple[str, list[int], str]]:
    """(parent state key, decision vector, child state key) from the root to the state `key`
    (`_RecordingContext.parents`: how each state was first reached)."""
    steps, seen = [], set()
    while key != ctx.root.key and key in ctx.parents and key not in seen:
        seen.add(key)
        parent, vec = ctx.parents[key]
        steps.append((parent, vec, key))
        key = parent
    return steps[::-1]


class _Measured:
    """Reads the search's caches: ratios by state key, kernels by site."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.cache = ctx.evaluator.cache

    def ratio(self, key: str | None) -> float | None:
        if key == self.ctx.root.key:
            return 1.0
        ev = self.cache.get(key) if key is not None else None
        return float(ev.ratio) if ev is not None and ev.timed else None

    def relative(self, child_key: str | None, parent_key: str) -> float | None:
        """T(child) / T(parent), when both were timed."""
        child, parent = self.ratio(child_key), self.ratio(parent_key)
        return child / parent if child is not None and parent else None

    def kernels(self, state_hash: str, augmented) -> tuple[Any, dict[int, list[int]] | None]:
        """The profile of a state and its sites' kernels (mapped now if the profile's taker
        did not), or (None, None) when it was not profiled."""
        caches = self.ctx.caches
        prof = caches.profiles.get(state_hash)
        if prof is None:
            return None, None
        if state_hash not in caches.site_kernels:
            from shlo_env.rewrite import region_cut

            try:
                caches.site_kernels[state_hash] = region_cut.site_kernels(prof, augmented)
            except (region_cut.RegionError, ValueError):
                caches.site_kernels[state_hash] = {}
        return prof, caches.site_kernels[state_hash]


def _lines(pairs) -> list[str]:
    return [f"{file}:{line}" for file, line in pairs][:LINES_PER_ENTRY]


def _site_sources(alt, choice: int, label: str) -> list[tuple[str, int]]:
    """The user's lines the new ops of one alternative carry."""
    out: list[tuple[str, int]] = []
    for op in alt.region_ops(choice):
        out += [x for x in location_sources(op.location).get(label, ()) if x not in out]
    return out


def applied_rewrites(ctx, key: str) -> list[dict]:
    """One record per pattern per step of the path from the root to the state `key`."""
    m = _Measured(ctx)
    out: list[dict] = []
    with ir_scope():
        for step, (parent, vec, child) in enumerate(path_steps(ctx, key)):
            exp = ctx.caches.expanded.get(parent)
            if exp is None:
                continue
            by_label: dict[str, list[tuple[int, int]]] = {}
            for i, c in enumerate(vec):
                if c and exp.dims[i].kind == "rewrite":
                    by_label.setdefault(exp.dims[i].labels[c], []).append((i, c))
            prof, kernels = m.kernels(exp.state.hash, exp.augmented)
            others = len(by_label) - 1 + sum(1 for i, c in enumerate(vec) if c and exp.dims[i].kind != "rewrite")
            for label, sites in by_label.items():
                record: dict[str, Any] = {"pattern": label, "step": step, "sites": [list(s) for s in sites]}
                sources: list[tuple[str, int]] = []
                for i, c in sites:
                    sources += [x for x in _site_sources(exp.alts[exp.dims[i].index], c, label) if x not in sources]
                record["sources"] = _lines(sources)
                if prof is not None and kernels is not None:
                    touched = {k for i, _ in sites for k in kernels.get(exp.dims[i].index, ())}
                    record["share"] = sum(prof.kernels[k].share for k in touched)
                    record["kernel_ms"] = 1e3 * sum(prof.kernels[k].time_s for k in touched)
                record.update(_contribution(ctx, m, exp, parent, vec, child, label, sites, others))
                out.append(record)
    return out


def unrecorded_rewrites(taken: list[dict], best) -> list[dict]:
    """Records for the rewrites of `best` that no step of its recorded path took (`taken`: a
    state made without `ctx.child`): their lines from the program's locations, no timing."""
    covered = {r["pattern"] for r in taken}
    missing = [label for label in dict.fromkeys(best.applied) if label not in covered]
    if not missing:
        return []
    with ir_scope():
        located = rewrite_sources(walk_ops(best.program.body))
    return [{"pattern": label, "sources": _lines(located.get(label, [])), "ratio": None,
             "measured": "taken outside the recorded decision path (not timed alone)"} for label in missing]


def _contribution(ctx, m: _Measured, exp, parent: str, vec, child: str, label: str, sites, others: int) -> dict:
    """The measured ratio of one rewrite of a step, and how it was measured."""
    alone = [0] * len(vec)
    for i, c in sites:
        alone[i] = c
    state = ctx.caches.children.get((parent, tuple(alone)))
    ratio = m.relative(state.key if state is not None else None, parent)
    if ratio is not None:
        return {"ratio": ratio, "measured": "alone" if others == 0 else
                f"alone (without the step's {others} other rewrite{'s' * (others != 1)} or actions)"}
    regions = [ctx.caches.region_ratios.get((exp.state.hash, i, c)) for i, c in sites]
    regions = [r for r in regions if r is not None and math.isfinite(r)]
    if regions:
        return {"ratio": min(regions), "measured": f"on its best region ({len(regions)} of {len(sites)} sites judged)"}
    ratio = m.relative(child, parent)
    if ratio is not None:
        return {"ratio": ratio,
                "measured": f"for its step, with {others} other rewrite{'s' * (others != 1)} or actions"}
    return {"ratio": None, "measured": "not timed alone"}


def hotspots(ctx, top: int = TOP_KERNELS) -> list[dict]:
    """The original's hottest kernels (when it was profiled): where their time comes from in
    the user's source, and what the patterns matched there measured."""
    from shlo_env.rewrite import region_cut
    cached = ctx.caches.augmented.get(ctx.root.hash)
    if cached is None:
        return []
    augmented, alts = cached
    m = _Measured(ctx)
    prof, kernels = m.kernels(ctx.root.hash, augmented)
    if prof is None:
        return []
    by_kernel: dict[int, list[int]] = {}
    for site, ks in (kernels or {}).items():
        for k in ks:
            by_kernel.setdefault(k, []).append(site)
    tried = _tried_on_original(ctx, m)
    out = []
    with ir_scope():
        baseline = region_cut.baseline(augmented)  # the profiled program: held while its ops are read
        ops = list(walk_ops(baseline.body))
        for k, kern in enumerate(prof.kernels[:top]):
            sources: list[tuple[str, int]] = []
            for i in kern.ops:
                where = source_line(ops[i].location) if i < len(ops) else None
                if where is not None and where not in sources:
                    sources.append(where)
            patterns: dict[str, dict] = {}
            for site in by_kernel.get(k, ()):
                for choice, label in enumerate(alts[site].labels[1:], 1):
                    found = [tried.get((site, label)), _region(ctx, site, choice)]
                    patterns[label] = _best([patterns.get(label)] + found)
            out.append({"kernel": kern.name, "category": kern.category + (" (loop)" if kern.in_loop else ""),
                        "share": kern.share, "ms": kern.time_s * 1e3,
                        "ops": dict(sorted(kern.op_kinds.items(), key=lambda kv: -kv[1])[:4]),
                        "sources": _lines(sources), "patterns": patterns})
    return out


def _measure(ratio: float | None, how: str) -> dict:
    """One outcome: a ratio (None when there is no timing) and how it was had."""
    return {"ratio": ratio, "how": how}


def _best(outcomes) -> dict:
    """The lowest ratio among the outcomes; without any timing, the first that says why."""
    known = [o for o in outcomes if o is not None]
    timed = [o for o in known if o["ratio"] is not None]
    if timed:
        return min(timed, key=lambda o: o["ratio"])
    return known[0] if known else _measure(None, "not tried")


def _region(ctx, site: int, choice: int) -> dict | None:
    r = ctx.caches.region_ratios.get((ctx.root.hash, site, choice))
    return _measure(r, "region") if r is not None and math.isfinite(r) else None


def _tried_on_original(ctx, m: _Measured) -> dict[tuple[int, str], dict]:
    """(site, pattern) -> the best whole-program outcome of a candidate taking only that
    pattern (at this site alone, or at several: a sweep) from the original (or from the
    original with the XLA options the option screen chose: the same sites)."""
    out: dict[tuple[int, str], dict] = {}
    for (parent, vec), state in ctx.caches.children.items():
        exp = ctx.caches.expanded.get(parent)
        if state is None or exp is None or exp.state.hash != ctx.root.hash:
            continue
        chosen = [(i, exp.dims[i].labels[c]) for i, c in enumerate(vec) if c]
        if not chosen or any(exp.dims[i].kind != "rewrite" for i, _ in chosen) or len({x for _, x in chosen}) != 1:
            continue
        ev = m.cache.get(state.key)
        if ev is None:
            continue
        where = "whole program" + ("" if len(chosen) == 1 else f", {len(chosen)} sites")
        ratio = m.relative(state.key, parent)
        if ev.same_executable_as in (parent, getattr(ctx.evaluator, "original_key", parent)):
            outcome = _measure(ratio, f"({where}: XLA compiles it to the same executable)")
        elif ratio is not None:
            outcome = _measure(ratio, where)
        elif not ev.ok:
            outcome = _measure(None, f"rejected: {ev.failure or 'failed'}")
        else:
            outcome = _measure(None, "verified, not timed")
        for i, label in chosen:
            out[(i, label)] = _best([out.get((i, label)), outcome])
    return out


def roofline_record(cost: dict, time_s: float) -> dict:
    """The original's time against its roofline floor, or why there is none."""
    from shlo_env.execute import runtime
    from shlo_env.measure import roofline

    if not cost or cost.get("error"):
        return {"reason": "no XLA cost analysis"}
    try:
        import jax

        kind = jax.devices()[0].device_kind
        flops, bandwidth, source = roofline.peak_rates(runtime.platform(), kind, measure=False)
    except (ValueError, RuntimeError) as e:
        return {"reason": str(e)}
    if not flops or not bandwidth:
        if runtime.platform() == "cpu":
            source = (f"this CPU's peak rates are not known here (set {roofline.ENV_FLOPS} and "
                      f"{roofline.ENV_BANDWIDTH}, flops/s and bytes/s)")
        return {"reason": source}
    floor = roofline.floor_s(cost, flops, bandwidth)
    if floor is None or floor <= 0:
        return {"reason": "the cost analysis has no flops or bytes"}
    return {"floor_s": floor, "time_s": time_s, "source": source}


def attribute(run) -> None:
    """Fill the result's `rewrites`, `hotspots` and `roofline` from the search's caches."""
    res, ctx = run.res, run.ctx
    if ctx is None:
        return
    if not res.returned_original and run.best is not None:
        taken = applied_rewrites(ctx, run.best.key)
        res.rewrites = taken + unrecorded_rewrites(taken, run.best)
    res.hotspots = hotspots(ctx)
    time_s = res.baseline.get("full", math.nan) if res.baseline else math.nan
    if res.cost_original and time_s and not math.isnan(time_s):
        res.roofline = roofline_record(res.cost_original, time_s)


__all__ = ["applied_rewrites", "attribute", "hotspots", "path_steps", "roofline_record", "unrecorded_rewrites"]
