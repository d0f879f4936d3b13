"""`shlo-env learn train|eval`: the learned cost model over an exported dataset (docs/learned.md)."""

from __future__ import annotations

import hashlib
import json
import math
import time

import numpy as np

from shlo_env.learn import dataset, metrics, model


def add_arguments(p) -> None:
    sub = p.add_subparsers(dest="action", required=True)
    t = sub.add_parser("train", help="train the ranking model on the train split")
    t.add_argument("--data", required=True, help="an exported dataset directory")
    t.add_argument("--out", default=str(model.WEIGHTS), help="weights file (.npz)")
    t.add_argument("--steps", type=int, default=300)
    t.add_argument("--lr", type=float, default=3e-3)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--weight-decay", type=float, default=1e-3)
    t.add_argument("--tie-weight", type=float, default=1.0,
                   help="weight of the loss that pulls exact ties (one executable) to one score")
    t.add_argument("--select-on", default="tau_above_noise", choices=["tau_above_noise", "kendall_tau"],
                   help="the validation metric early stopping keeps the best step of")
    t.add_argument("--noise-gaps", action="store_true",
                   help="train on the pairs the metrics count: labels apart by more than the program's noise")
    t.add_argument("--no-early-stopping", dest="early_stopping", action="store_false",
                   help="return the last step instead of the one with the best validation tau")
    x = sub.add_parser("train-exe", help="fit the executable model (linear over hlo_features; the learned "
                                         "strategy's second stage) on the train and val splits")
    x.add_argument("--data", required=True, help="an exported dataset directory with executable features (format 4)")
    x.add_argument("--out", default=None, help="weights file (.npz); default: the one shipped in the package")
    x.add_argument("--l2", type=float, default=None, help="default: exe_model.DEFAULT_L2 (chosen with `learn cv "
                                                          "--model executable`)")
    x.add_argument("--train-only", action="store_true", help="fit on the train split alone")
    pol = sub.add_parser("policy", help="train a REINFORCE policy on the gym env; evaluate it, pick-first and "
                                        "random on held-out sub-graphs (shlo_env/learn/policy.py)")
    pol.add_argument("--programs", default="inst-10-20")
    pol.add_argument("--reward", default="cost_model")
    pol.add_argument("--train-programs", type=int, default=40)
    pol.add_argument("--eval-programs", type=int, default=20)
    pol.add_argument("--updates", type=int, default=30)
    pol.add_argument("--episodes-per-update", type=int, default=8)
    pol.add_argument("--max-steps", type=int, default=4)
    pol.add_argument("--seeds", type=int, nargs="+", default=[0], help="one policy trained per seed")
    pol.add_argument("--eval-seeds", type=int, nargs="+", default=[0, 1])
    cv = sub.add_parser("cv", help="grouped K-fold cross-validation by source program over the train and val "
                                   "splits: held-out tau per training step, against the untrained prior")
    cv.add_argument("--data", required=True)
    cv.add_argument("--folds", type=int, default=3)
    cv.add_argument("--steps", type=int, default=150)
    cv.add_argument("--weight-decay", type=float, default=1e-2)
    cv.add_argument("--tie-weight", type=float, default=1.0)
    cv.add_argument("--noise-gaps", action="store_true")
    cv.add_argument("--seed", type=int, default=0)
    cv.add_argument("--model", choices=["graph", "executable"], default="graph",
                    help="graph: the graph network per training step; executable: the executable model per l2")
    e = sub.add_parser("eval", help="Kendall tau / OPA per split vs XLA cost analysis and the roofline")
    e.add_argument("--data", required=True)
    e.add_argument("--weights", default=None, help="default: the weights shipped in the package")
    e.add_argument("--exe-weights", default=None, help="the executable model's; default: the shipped ones")


def baseline_scores(c: dict) -> dict[str, np.ndarray]:
    """Analytic predictions for a program's candidates: XLA flops + bytes, and the roofline estimate."""
    from shlo_env.search.cost_model import MACHINE, roofline

    xla = c["flops"] + c["bytes"]
    roof = np.array([roofline({"flops": f, "bytes": b, "transcendentals": 0.0 if math.isnan(t) else t},
                              MACHINE["cpu"]) for f, b, t in zip(c["flops"], c["bytes"], c["transcendentals"])])
    return {"xla_cost_analysis": np.nan_to_num(xla, nan=np.inf), "roofline": roof}


def evaluate(data: str, weights=None, exe_weights=None) -> dict:
    """Per split: the graph network ("learned"), the executable model where the data has
    executable features ("learned_executable"), and the analytic baselines, on the same programs."""
    from shlo_env.learn import exe_model

    params, norm, info = model.load(weights)
    exe = exe_model.load(exe_weights)
    out = {"weights": info, "exe_weights": exe.info}
    for name in dataset.SPLITS:
        try:
            split = dataset.load(data, name)
        except dataset.DatasetError:
            continue
        if not len(split):
            out[name] = {"programs": 0}
            continue
        batch = model.batch_from_split(split)
        pred = model.predict(params, norm, batch)
        by: dict[str, list] = {"learned": [], "xla_cost_analysis": [], "roofline": []}
        if "cand_exe" in split.arrays:
            by["learned_executable"] = []
        gaps = []
        for p in range(len(split)):
            c = split.candidates(p)
            truth = dataset.label(c)
            gaps.append(metrics.noise_gap(float(c["noise"][0]) if len(c["noise"]) else math.nan))
            mine = (batch.copy_program == p) & ~batch.copy_is_original
            by["learned"].append((pred[mine], truth))
            if "learned_executable" in by:  # a candidate without features ranks last
                patterns = exe_model.candidate_patterns(split, p, c["decisions"])
                by["learned_executable"].append((np.nan_to_num(exe.scores(c["exe"], patterns) + np.where(
                    np.isfinite(c["exe"]).all(axis=1), 0.0, np.inf), nan=np.inf), truth))
            for k, s in baseline_scores(c).items():
                by[k].append((s, truth))
        out[name] = {k: metrics.per_program(v, gaps) for k, v in by.items()}
        out[name]["candidates"] = split.num_candidates
    return out


def run(args) -> int:
    try:
        return _run(args)
    except (dataset.DatasetError, FileNotFoundError, ValueError) as e:
        print(f"error: {e}")
        return 2


def _run(args) -> int:
    if args.action == "train-exe":
        from shlo_env.learn import exe_model

        names = ("train",) if args.train_only else ("train", "val")
        progs = _exe_programs(args.data, names)
        l2 = exe_model.DEFAULT_L2 if args.l2 is None else args.l2
        error = exe_model.cv_log_error_median(progs, fold_of, l2=l2)
        m = exe_model.fit(progs, l2, info={"data": str(args.data), "splits": list(names),
                                           "cv_log_error_median": error})
        m.save(args.out or exe_model.WEIGHTS)
        print(json.dumps(m.info, indent=1))
        return 0
    if args.action == "train":
        train = dataset.load(args.data, "train")
        started = time.perf_counter()
        batch = model.batch_from_split(train)
        val = model.batch_from_split(dataset.load(args.data, "val")) if args.early_stopping else None
        kept: list[str] = []

        def log(message: str) -> None:
            print(message)
            if message.startswith("kept"):  # the early-stopping step goes into the weights' info
                kept.append(message)

        params, norm, losses = model.train(batch, steps=args.steps, lr=args.lr, seed=args.seed,
                                           weight_decay=args.weight_decay, tie_weight=args.tie_weight,
                                           select_on=args.select_on, val=val, noise_gaps=args.noise_gaps, log=log)
        info = {"data": str(args.data), "programs": len(train), "candidates": train.num_candidates,
                "steps": args.steps, "lr": args.lr, "seed": args.seed, "weight_decay": args.weight_decay,
                "tie_weight": args.tie_weight, "select_on": args.select_on, "noise_gaps": args.noise_gaps,
                "early_stopping": kept[-1] if kept else None, "final_loss": losses[-1],
                "first_loss": losses[0], "train_s": round(time.perf_counter() - started, 1),
                "format_version": dataset.FORMAT_VERSION}
        if val is not None:  # how far off the predicted ratios are, for the learned strategy's probes
            info["val_log_error_median"] = float(np.median(model.log_errors(model.predict(params, norm, val), val)))
        model.save(args.out, params, norm, info)
        print(json.dumps(info, indent=1))
        return 0
    if args.action == "policy":
        from shlo_env.learn import policy

        out = policy.experiment(programs=args.programs, reward=args.reward, train_programs=args.train_programs,
                                eval_programs=args.eval_programs, updates=args.updates,
                                episodes_per_update=args.episodes_per_update, max_steps=args.max_steps,
                                seeds=args.seeds, eval_seeds=args.eval_seeds)
        print(json.dumps(out, indent=1))
        return 0
    if args.action == "cv" and args.model == "executable":
        from shlo_env.learn import exe_model

        print(json.dumps(exe_model.cross_validate(_exe_programs(args.data), fold_of, args.folds), indent=1))
        return 0
    if args.action == "cv":
        print(json.dumps(cross_validate(args.data, folds=args.folds, steps=args.steps, seed=args.seed,
                                        weight_decay=args.weight_decay, tie_weight=args.tie_weight,
                                        noise_gaps=args.noise_gaps, log=print), indent=1))
        return 0
    print(json.dumps(evaluate(args.data, args.weights, args.exe_weights), indent=1))
    return 0


def _exe_programs(data: str, splits=("train", "val")) -> list:
    """`exe_model.programs_of` over the named splits of an export."""
    from shlo_env.learn import exe_model

    return [p for n in splits for p in exe_model.programs_of(dataset.load(data, n))]


def fold_of(source: str, folds: int) -> int:
    """A source program's cross-validation fold: a stable hash (another salt than the split's)."""
    return int(hashlib.sha256(("cv:" + source).encode()).hexdigest()[:8], 16) % folds


def cross_validate(data: str, *, folds: int = 3, steps: int = 150, seed: int = 0, weight_decay: float = 1e-2,
                   tie_weight: float = 1.0, noise_gaps: bool = False, log=None) -> dict:
    """Held-out `tau_above_noise` every 10 training steps, per fold and averaged, where each fold
    holds out the train and val programs of a third (1/folds) of the source programs: a
    steadier estimate of how the recipe does on unseen programs than one validation split of
    a few sources (the test split is not used). Step 0 is the untrained model: its bytes
    roofline prior."""
    splits = [dataset.load(data, s) for s in ("train", "val")]
    per_fold: list[dict[int, float]] = []
    for k in range(folds):
        inside, held = [], []
        for sp in splits:
            fold = [fold_of(p["source"], folds) for p in sp.programs]
            inside.append(model.batch_from_split(sp, [p for p in range(len(sp)) if fold[p] != k]))
            held.append(model.batch_from_split(sp, [p for p in range(len(sp)) if fold[p] == k]))
        curve: dict[int, float] = {}
        model.train(model.concat(inside), steps=steps, seed=seed, weight_decay=weight_decay, tie_weight=tie_weight,
                    val=model.concat(held), noise_gaps=noise_gaps, curve=curve)
        per_fold.append(curve)
        if log:
            log(f"fold {k}: " + ", ".join(f"step {t} {v:.3f}" for t, v in sorted(curve.items()) if t % 50 == 0))
    steps_seen = sorted(set.intersection(*(set(c) for c in per_fold)))
    return {"folds": per_fold, "mean": {t: float(np.mean([c[t] for c in per_fold])) for t in steps_seen},
            "settings": {"data": data, "folds": folds, "steps": steps, "seed": seed, "weight_decay": weight_decay,
                         "tie_weight": tie_weight, "noise_gaps": noise_gaps}}
