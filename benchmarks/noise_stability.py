"""How stable are the noise thresholds, and are they honest? (docs/bench.md, "The noise profile")

    python benchmarks/noise_stability.py --profiles 3            # back-to-back quick profiles
    python benchmarks/noise_stability.py --profiles 1 --control 8 --control-repeats 6
    python benchmarks/noise_stability.py --profiles 1 --control 12 --control-dataset zoo

Stability: measures `--profiles` quick profiles back to back (the bench's spec,
`shlo_env.bench.sweep.QUICK_NOISE`) and prints, per profile, the pooled faster threshold and the
per-runtime one (`shlo_env.measure.noise_thresholds.NoiseModel`) at 0.3, 1 and 10 ms. Also the pooled threshold of
the old quick spec (6 self-timings of every program: the first 6 of each program here).

Control: corpus (or zoo, `--control-dataset zoo`) programs that are not in the profile are each timed against themselves
`--control-repeats` times (one timing request each, as the search times a candidate); the share
classified "faster" by the last profile's thresholds at their runtime, and by its pooled
threshold; and each program's self-timings in consecutive threes, their medians judged as the
bench judges a rewrite's final ratio (the median of `FINAL_TIMINGS` timings, by the profile's
medians of as many self-timings). An honest threshold classifies about (1 - quantile) / 2 =
2.5 % of them as faster.
Load averages are printed with each step (the machine may be shared).
"""

from __future__ import annotations

import argparse
import json
import os

from shlo_env import corpus
from shlo_env.bench import noise_profile as noise
from shlo_env.execute import runtime
from shlo_env.bench.sweep import QUICK_NOISE
from shlo_env.measure.timing_policy import FINAL_TIMINGS, SEARCH
from shlo_env.execute.worker import CandidateError, Worker


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def old_pooled(profile: dict, repeats: int = 6) -> float:
    return noise.thresholds([r for d in profile["details"] if "ratios" in d for r in d["ratios"][:repeats]])[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profiles", type=int, default=3)
    ap.add_argument("--control", type=int, default=0, help="programs timed against themselves")
    ap.add_argument("--control-dataset", default="corpus", choices=("corpus", "zoo"),
                    help="where the control programs come from (default corpus; zoo: the fastest first)")
    ap.add_argument("--control-repeats", type=int, default=6)
    ap.add_argument("--json", default=None, help="write the profiles and control ratios here")
    a = ap.parse_args()
    programs = noise.profile_programs(QUICK_NOISE["programs"], 0)
    profiles = []
    with Worker() as worker:
        for i in range(a.profiles):
            before = load()
            p = noise.measure(programs, repeats=QUICK_NOISE["repeats"], long_repeats=QUICK_NOISE["long_repeats"],
                              worker=worker, progress=False)
            m = noise.NoiseModel.from_profile(p)
            profiles.append(p)
            print(f"profile {i}: {p['samples']} self-timings in {p['seconds']:.0f} s, load {before} -> {load()}: "
                  f"pooled faster < {p['faster']:.3f} (old quick spec {old_pooled(p):.3f}); per runtime: "
                  + ", ".join(f"{t * 1e3:g} ms {m.faster_at(t):.3f}" for t in (3e-4, 1e-3, 1e-2)), flush=True)
        control = []
        if a.control and profiles:
            m = noise.NoiseModel.from_profile(profiles[-1])
            used = {label for label, _ in programs}
            entries = [e for e in corpus.entries(a.control_dataset) if e.uri not in used]
            if a.control_dataset == "zoo":  # the fastest first: the slowest take seconds a timing
                entries.sort(key=lambda e: e.metadata.get("runtime_ms", 0.0))
            entries = entries[: a.control]
            before = load()
            for e in entries:
                prog = corpus.load(e.uri)
                text = prog.text()
                worker.set_inputs("control", runtime.random_inputs(prog.in_specs, 0))
                try:
                    for _ in range(a.control_repeats):
                        x, y = worker.time([text, text], "control", SEARCH)
                        control.append((e.uri, min(x.full, y.full), y.full / x.full))
                except CandidateError as err:
                    print(f"{e.uri}: {err}")
            per_runtime = sum(r < m.faster_at(t) for _, t, r in control)
            pooled = sum(r < m.faster for _, t, r in control)
            print(f"control: {len(control)} self-comparisons of {len(entries)} {a.control_dataset} programs (load {before} -> "
                  f"{load()}): classified faster {per_runtime} ({per_runtime / max(1, len(control)):.1%}) by the "
                  f"per-runtime thresholds, {pooled} ({pooled / max(1, len(control)):.1%}) by the pooled one "
                  f"({m.faster:.3f})")
            by_program: dict[str, tuple[float, list[float]]] = {}  # uri -> (runtime, self-timing ratios)
            for uri, t, r in control:
                t0, rs = by_program.get(uri, (t, []))
                by_program[uri] = (min(t0, t), rs + [r])
            grouped = [(t, x) for t, rs in by_program.values() for x in noise.medians(rs, FINAL_TIMINGS)]
            medians = sum(r < m.faster_at(t, FINAL_TIMINGS) for t, r in grouped)
            print(f"control, medians of {FINAL_TIMINGS} (a rewrite's final ratio): {medians} of {len(grouped)} "
                  f"({medians / max(1, len(grouped)):.1%}) classified faster by the profile's medians of "
                  f"{FINAL_TIMINGS} at their runtime")
            for uri, (t, rs) in by_program.items():
                print(f"  {uri}: {t * 1e3:.2f} ms, faster < {m.faster_at(t):.3f} (median of {FINAL_TIMINGS}: "
                      f"< {m.faster_at(t, FINAL_TIMINGS):.3f}), ratios " + " ".join(f"{r:.3f}" for r in rs))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"profiles": profiles, "control": control}, f)


if __name__ == "__main__":
    main()
