"""`SearchOptions`: what a search searches and how, declared once (issue 29).

`optimize`, `shlo_env.jit`, `shlo-env optimize` and `shlo-env bench` take these options; each
field is declared here once, with `about(...)` metadata that says

- `doc`: what it does (the command-line help and the class docstring are made from it);
- `result`: whether it changes what the search returns. The persistent cache key of a search
  (`shlo_env.api.cache.search_key`) is `SearchOptions.result_key()`, made from exactly these
  fields, so a new result-changing option cannot be left out of the key;
- `flag` (and argparse settings): its command-line flag; `add_arguments` / `from_args` build
  a command's flags from the declarations, with the field name as argparse `dest`;
- `key`: how its value is written into the cache key (default: a plain JSON form).

    opts = SearchOptions(strategy="beam", budget_s=30)
    opts.with_(seed=1)                       # unknown names: TypeError naming the known ones
    options_from(opts, {"budgte_s": 3}, where="optimize")  # TypeError: did you mean 'budget_s'?
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import enum
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from shlo_env.measure.noise_thresholds import NoiseModel
from shlo_env.measure.numerics import Numerics
from shlo_env.search.base import Strategy
from shlo_env.measure.timing_policy import SEARCH, TimingPolicy


@dataclasses.dataclass(frozen=True)
class About:
    """The declaration of one option besides its type and default."""

    doc: str
    result: bool  # changes what the search returns: part of the cache key
    flag: str | None = None  # command-line flag; None: not offered on the command line
    cli: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # more argparse settings (help: the
    # flag's help when the doc speaks of Python values)
    key: Callable[[Any], Any] | None = None  # the value's form in the cache key (None: `plain`)


def about(doc: str, *, result: bool, flag: str | None = None, key: Callable[[Any], Any] | None = None,
          **cli: Any) -> dict:
    """A field's metadata: `field(default=..., metadata=about("...", result=True, flag="--x"))`."""
    return {"about": About(doc, result, flag, dict(cli), key)}


def plain(x: Any) -> Any:
    """`x` as JSON data, for a cache key: containers, dataclasses and enums by value; any other
    object by its class and repr (an object whose repr names its address only ever misses)."""
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, enum.Enum):
        return f"{type(x).__qualname__}.{x.name}"
    if isinstance(x, Mapping):
        return {str(k): plain(v) for k, v in sorted(x.items(), key=lambda kv: str(kv[0]))}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, (set, frozenset)):
        return sorted((plain(v) for v in x), key=lambda v: json.dumps(v, sort_keys=True))
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {"type": type(x).__qualname__,
                **{f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x)}}
    return {"type": f"{type(x).__module__}.{type(x).__qualname__}", "repr": repr(x)}


def _pattern_key(patterns) -> str:
    from shlo_env.api.cache import pattern_identity

    return pattern_identity(patterns)


def _strategy_key(strategy) -> Any:
    return strategy if isinstance(strategy, str) else plain(strategy)


def _passes_key(passes) -> list:
    from shlo_env.search import passes as pass_actions

    return plain(list(pass_actions.resolve(passes)))


def _xla_options_key(xla_options) -> list:
    from shlo_env.execute import xla_options as option_actions

    return plain(list(option_actions.resolve(xla_options)))


def _names(text: str) -> list[str]:
    """A comma-separated command-line list."""
    return [n.strip() for n in text.split(",") if n.strip()]


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON: {e}") from None
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


def _xla_option_arg(text: str) -> str | list[str]:
    """`--xla-options approx` (or auto, default, none) as it is, else comma-separated NAME=VALUE tokens."""
    return text if text in ("approx", "auto", "default", "none") else _names(text)


_json_object.__name__ = "JSON object"  # argparse's "invalid JSON object value: ..."
_names.__name__ = "comma-separated list"


@dataclasses.dataclass(frozen=True)
class SearchOptions:
    """What a search searches and how: everything but the live objects (the worker, the device
    lock, the progress line), so one value can be stored, compared and sent to a sweep's
    workers. The fields, with their documentation, are listed below (made from the
    declarations: `about`)."""

    patterns: object = dataclasses.field(default=None, metadata=about(
        "Pattern classes/instances/names (default: every value-preserving pattern).",
        result=True, flag="--patterns", key=_pattern_key, type=_names, metavar="NAME,NAME",
        help="comma-separated pattern names (default: every value-preserving pattern)"))
    numerics: str | None = dataclasses.field(default=None, metadata=about(
        "a cap on the numerics tiers: \"exact\" (bitwise-equal rewrites only, no XLA actions), "
        "\"reassociate\" (also reordered float math), \"approx\" (also value-changing patterns and "
        "fast math); None: every value-preserving pattern, and APPROX only where asked for by name.",
        result=True, flag="--numerics", choices=("exact", "reassociate", "approx")))
    exclude_patterns: Sequence[str] = dataclasses.field(default=(), metadata=about(
        "pattern names or families (`shlo-env patterns`: dot, loops, layout, ...) never to use.",
        result=True, flag="--exclude-patterns", type=_names, metavar="NAME,FAMILY",
        help="comma-separated pattern names or families never to use (shlo-env patterns lists them)"))
    strategy: str | Strategy = dataclasses.field(default="auto", metadata=about(
        "a name from `shlo_env.search.strategies()`, or \"auto\" (by decision-space size: exhaustive "
        "when small, beam search, factorized MCTS when large).",
        result=True, flag="--strategy", key=_strategy_key))
    strategy_options: dict | None = dataclasses.field(default=None, metadata=about(
        "keyword options for the strategy (e.g. {\"alpha\": 1.0} for beam; a JSON object on the "
        "command line).", result=True, flag="--strategy-options", type=_json_object, metavar="JSON"))
    budget_s: float = dataclasses.field(default=60.0, metadata=about(
        "wall-clock budget in seconds, split by one schedule (`shlo_env.search.schedule`): fixed "
        "phases, the search, its acceptance and the final measurement; the report says where it went.", result=True, flag="--budget", type=float, metavar="SECONDS"))
    max_steps: int = dataclasses.field(default=6, metadata=about(
        "augment-decide-apply rounds a strategy may take.", result=True, flag="--max-steps", type=int))
    num_random: int = dataclasses.field(default=3, metadata=about(
        "seeded random input sets every candidate is verified on, besides the example inputs.",
        result=True, flag="--num-random", type=int))
    seed: int = dataclasses.field(default=0, metadata=about(
        "seed of the random input sets and of the strategy.", result=True, flag="--seed", type=int))
    min_gain: float = dataclasses.field(default=0.02, metadata=about(
        "the smallest speedup worth taking: the search's screening threshold is 1 - min_gain, and the "
        "paired acceptance test accepts only an estimated gain of at least this.",
        result=True, flag="--min-gain", type=float))
    threshold: float | NoiseModel | None = dataclasses.field(default=None, metadata=about(
        "an external screening threshold: a ratio (the stricter of it and 1 - min_gain screens the "
        "candidates), or a `shlo_env.measure.noise_thresholds.NoiseModel` (the machine's noise profile: recorded, "
        "not used to screen; the paired test deals with noise).",
        result=True, flag="--threshold", type=float, metavar="RATIO",
        help="an external screening threshold (a ratio); the stricter of it and 1 - --min-gain screens "
             "the candidates before the paired acceptance test"))
    timeout_s: float | None = dataclasses.field(default=None, metadata=about(
        "per compile/run limit in the worker, in seconds (a hang costs one candidate; default "
        "SHLO_ENV_TIMEOUT_S).", result=False, flag="--timeout", type=float, metavar="SECONDS"))
    passes: bool | Sequence[str] = dataclasses.field(default=False, metadata=about(
        "also let the search disable XLA passes: True for the platform's candidates "
        "(`shlo_env.search.passes.candidate_passes()`), or a list of pass names.",
        result=True, flag="--passes", key=_passes_key, action="store_true",
        help="also let the search disable XLA passes (the platform's candidates, shlo_env.search.passes)"))
    xla_options: bool | str | Sequence[str] = dataclasses.field(default="default", metadata=about(
        "XLA compile options the search may set: \"default\" for the few that paid on the zoo "
        "(`shlo_env.execute.xla_options.DEFAULT_SCREEN`: single-threaded Eigen on CPU, on programs under "
        "1,000 ops), True for all the "
        "platform's value-preserving ones (`shlo_env.execute.xla_options`), \"approx\" to add fast math "
        "(APPROX tier, looser verification), False (or \"none\") for none, or a list of `name=value` "
        "tokens. Each is verified and timed like any candidate; the result compiles with the chosen options.",
        result=True, flag="--xla-options", key=_xla_options_key, nargs="?", const=True,
        type=_xla_option_arg, metavar="approx|NAME=VALUE,...",
        help="XLA compile options the search may set: all the platform's value-preserving ones "
             "(shlo_env.execute.xla_options; without this flag only the default few, DEFAULT_SCREEN); 'approx' "
             "adds fast math (APPROX tier, looser verification); 'none' for none; or comma-separated "
             "NAME=VALUE tokens. The result is compiled with the options chosen"))
    confirm: bool = dataclasses.field(default=True, metadata=about(
        "re-time the best candidate before accepting it (always, whatever time is left).",
        result=True, flag="--no-confirm", action="store_false",
        help="accept the best candidate without timing it again (no confirmation)"))
    final_timing: bool = dataclasses.field(default=True, metadata=about(
        "measure the returned program once more for the report (`optimize` measures its callable "
        "in-process instead).", result=False, flag="--no-final-timing", action="store_false",
        help="no final measurement of the returned program for the report"))
    cost: bool = dataclasses.field(default=True, metadata=about(
        "record XLA's cost analysis (flops, bytes) of the original and the returned program.",
        result=False, flag="--no-cost", action="store_false",
        help="no XLA cost analysis of the original and the returned program"))
    timing: TimingPolicy = dataclasses.field(default=SEARCH, metadata=about(
        "how each side-by-side measurement is taken (`shlo_env.measure.timing_policy.TimingPolicy`).", result=True))
    name: str | None = dataclasses.field(default=None, metadata=about(
        "the name in the result (default: the program's or the function's).", result=False, flag="--name"))

    def __post_init__(self):
        check(self)

    def effective(self) -> "SearchOptions":
        """These options with `numerics` and `exclude_patterns` applied: `patterns` as the
        list of patterns the search may use (capped, exclusions removed) and, under
        numerics="exact", no XLA actions (they may reorder float math). What a search runs."""
        if self.numerics is None and not self.exclude_patterns:
            return self
        from shlo_env.patterns.base import all_patterns, resolve

        cap = Numerics.parse(self.numerics) if self.numerics is not None else None
        chosen = (all_patterns() if self.patterns is None and cap is Numerics.APPROX
                  else resolve(self.patterns))
        excluded = set(self.exclude_patterns)
        kept = [p for p in chosen if (cap is None or p.numerics <= cap)
                and p.name not in excluded and pattern_family(p) not in excluded]
        changes: dict[str, Any] = {"patterns": kept, "numerics": None, "exclude_patterns": ()}
        if cap is Numerics.EXACT:
            changes.update(passes=False, xla_options=False)
        elif cap is not Numerics.APPROX and self.xla_options == "approx":
            changes["xla_options"] = True  # the value-preserving ones
        return dataclasses.replace(self, **changes)

    def with_(self, **changes) -> "SearchOptions":
        """A copy with `changes` (checked: an unknown name is a TypeError naming the known ones)."""
        return options_from(self, changes, where="SearchOptions.with_")

    def result_key(self) -> dict:
        """The result-changing fields in their cache-key form (`shlo_env.api.cache.search_key`)."""
        out = {}
        for f in dataclasses.fields(self):
            a = declaration(f)
            if a.result:
                value = getattr(self, f.name)
                out[f.name] = (a.key or plain)(value)
        return json.loads(json.dumps(out, sort_keys=True, default=str))


def declaration(f: dataclasses.Field) -> About:
    return f.metadata["about"]


def option_fields() -> tuple[dataclasses.Field, ...]:
    return dataclasses.fields(SearchOptions)


def result_fields() -> tuple[str, ...]:
    """The names of the fields that change what a search returns (the cache key's fields)."""
    return tuple(f.name for f in option_fields() if declaration(f).result)


def options_from(base: SearchOptions | None, fields: Mapping[str, Any], *, where: str) -> SearchOptions:
    """`base` (default `SearchOptions()`) with `fields` replaced; an unknown name is a TypeError
    that says which call got it and what the options are. `mode=` ("quick", "default", "max")
    sets its fields (`MODES`) first; the other `fields` override it."""
    base = base if base is not None else SearchOptions()
    if "mode" in fields:
        fields = dict(fields)
        base = dataclasses.replace(base, **mode_fields(fields.pop("mode")))
    known = [f.name for f in option_fields()]
    unknown = [k for k in fields if k not in known]
    if unknown:
        hints = []
        for k in unknown:
            close = difflib.get_close_matches(k, known + ["mode"], n=1)
            hints.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise TypeError(f"{where}() got unknown search option{'s' if len(unknown) > 1 else ''} "
                        f"{', '.join(hints)}; the options are: mode, {', '.join(known)}")
    return dataclasses.replace(base, **fields) if fields else base


# --- modes: budget and strategy together ------------------------------------------------------

#: The named modes (docs/guide.md has them as a table). "default" is `SearchOptions()`'s own
#: values; `optimize` and `shlo-env optimize` use it, `shlo_env.jit` uses "quick" (its first call
#: blocks), `shlo-env bench`'s quick suite keeps its own 8 s per program.
MODES: dict[str, dict[str, Any]] = {
    "quick": {"budget_s": 15.0, "strategy": "auto", "max_steps": 3},
    "default": {"budget_s": 60.0, "strategy": "auto", "max_steps": 6},
    "max": {"budget_s": 600.0, "strategy": "auto", "max_steps": 12, "passes": True, "xla_options": True},
}


def mode_fields(mode: str) -> dict[str, Any]:
    """The field values of a named mode (ValueError naming the modes for any other name)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    return dict(MODES[mode])


def preset(mode: str, **fields: Any) -> SearchOptions:
    """`SearchOptions` of a named mode, with `fields` on top: `preset("quick", seed=1)`."""
    return options_from(None, {"mode": mode, **fields}, where="preset")


# --- checks, when the options are built ---------------------------------------------------------

NUMERICS_CAPS = ("exact", "reassociate", "approx")


def pattern_family(pattern) -> str:
    """A pattern's family: the module it is defined in (`shlo_env/patterns/dot.py`: "dot")."""
    return type(pattern).__module__.rsplit(".", 1)[-1]


def _bad(name: str, value: Any, why: str) -> ValueError:
    return ValueError(f"search option {name}={value!r}: {why}")


def check(o: SearchOptions) -> None:
    """Raise ValueError for a value no search could run with, naming the choices: called when
    the options are built, so a wrong name fails at once rather than when the search starts."""
    if isinstance(o.strategy, str) and o.strategy != "auto":
        import shlo_env.search as search_package  # its __init__ registers the strategies

        known = search_package.strategies()
        if known and o.strategy not in known:
            raise ValueError(f"unknown strategy {o.strategy!r}; choose from auto, {', '.join(known)}")
    elif not isinstance(o.strategy, (str, Strategy)):
        raise _bad("strategy", o.strategy, "not a strategy name or a Strategy")
    if isinstance(o.budget_s, bool) or not isinstance(o.budget_s, (int, float)) or not o.budget_s > 0:
        raise _bad("budget_s", o.budget_s, "must be a positive number of seconds")
    for name in ("max_steps", "num_random", "seed"):
        value = getattr(o, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _bad(name, value, "must be a non-negative integer")
    if not isinstance(o.min_gain, (int, float)) or not 0 <= o.min_gain < 1:
        raise _bad("min_gain", o.min_gain, "must be in [0, 1)")
    if o.timeout_s is not None and not (isinstance(o.timeout_s, (int, float)) and o.timeout_s > 0):
        raise _bad("timeout_s", o.timeout_s, "must be a positive number of seconds, or None")
    if o.numerics is not None and o.numerics not in NUMERICS_CAPS:
        raise _bad("numerics", o.numerics, f"choose from {', '.join(NUMERICS_CAPS)} (or None)")
    if isinstance(o.exclude_patterns, str):
        raise _bad("exclude_patterns", o.exclude_patterns, "a list of names, not one string")
    if isinstance(o.patterns, str):
        raise _bad("patterns", o.patterns, "a list of names, not one string")
    given: Iterable = o.patterns or ()  # type: ignore[assignment]  # names, classes or instances
    names = [p for p in given if isinstance(p, str)] + list(o.exclude_patterns)
    if names:
        from shlo_env.patterns.base import all_patterns

        every = all_patterns()
        named: set[str] = {p.name for p in every} | {pattern_family(p) for p in every}
        unknown = [n for n in names if n not in named]
        if unknown:
            close = [c for n in unknown for c in difflib.get_close_matches(n, sorted(named), n=1)]
            raise ValueError(f"no pattern named {', '.join(map(repr, unknown))}"
                             + (f" (did you mean {', '.join(map(repr, close))}?)" if close else "")
                             + "; `shlo-env patterns` lists them")


def _doc() -> str:
    lines = [(SearchOptions.__doc__ or "").rstrip(), "", "Attributes:"]
    for f in option_fields():
        a = declaration(f)
        tags = ("changes the result (cache key)" if a.result else "does not change the result") + (
            f"; {a.flag}" if a.flag else "")
        lines.append(f"  {f.name}: {a.doc} [{tags}]")
    return "\n".join(lines)


SearchOptions.__doc__ = _doc()


# --- command-line flags -------------------------------------------------------------------------

def add_arguments(parser, names: Iterable[str] | None = None, *, defaults: Mapping[str, Any] | None = None,
                  helps: Mapping[str, str] | None = None, group_title: str | None = "search options",
                  with_mode: bool = False) -> list[str]:
    """Add the flags of the options `names` (default: every option that has a flag) to
    `parser`, with the option's name as `dest`, its default (or `defaults[name]`) and its doc
    as help (or `helps[name]`). Returns the names added (for `from_args`)."""
    wanted = None if names is None else list(names)
    by_name = {f.name: f for f in option_fields()}
    if wanted is not None:
        missing = [n for n in wanted if n not in by_name or declaration(by_name[n]).flag is None]
        if missing:
            raise ValueError(f"no command-line flag for search option(s) {missing}")
    target = parser.add_argument_group(group_title) if group_title else parser
    if with_mode:  # the flags given override the mode's values: the others are left out of `args`
        target.add_argument("--mode", choices=tuple(MODES), default="default",
                            help="budget and strategy together: " + "; ".join(
                                f"{m}: " + ", ".join(f"{k}={v}" for k, v in fs.items()) for m, fs in MODES.items())
                            + " (default: default)")
    added = []
    for f in option_fields():
        a = declaration(f)
        if a.flag is None or (wanted is not None and f.name not in wanted):
            continue
        default = (defaults or {}).get(f.name, f.default)
        settings = {k: v for k, v in a.cli.items() if k != "help"}
        text = (helps or {}).get(f.name, a.cli.get("help", a.doc))
        if settings.get("action") not in ("store_true", "store_false") and default not in (None, False):
            text += f" (default {default})"
        target.add_argument(a.flag, dest=f.name, default=argparse.SUPPRESS if with_mode else default,
                            help=text.replace("%", "%%"), **settings)
        added.append(f.name)
    return added


def from_args(args, names: Iterable[str], base: SearchOptions | None = None) -> SearchOptions:
    """`base` with the values of the flags `names` (as `add_arguments` added them) from `args`;
    with `--mode` (`add_arguments(..., with_mode=True)`), the mode's values under the flags given."""
    fields = {n: getattr(args, n) for n in names if hasattr(args, n)}
    if getattr(args, "mode", None) is not None:
        fields["mode"] = args.mode
    return options_from(base, fields, where="from_args")


__all__ = ["MODES", "About", "SearchOptions", "about", "add_arguments", "check", "declaration", "from_args",
           "mode_fields", "option_fields", "options_from", "pattern_family", "plain", "preset", "result_fields"]
