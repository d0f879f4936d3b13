"""`shlo-env optimize IN -o OUT`: a StableHLO file in, the optimized module out.

    shlo-env optimize model.mlir -o model.opt.mlirbc --budget 60 --report
    cat model.mlir.xz | shlo-env optimize - -o - > model.opt.mlir

IN is `.mlir` text, `.mlirbc` bytecode (or a StableHLO portable artifact), optionally compressed
with xz, gzip, bzip2 or zstd (recognized by content, so stdin works too); `-` reads stdin. OUT's
extension picks the format (`.mlirbc` bytecode, else text; a trailing `.xz`/`.gz`/`.bz2`
compresses); `-` writes text to stdout. The search is `optimize_program` (every candidate
verified against the input module before it is timed); `--report` writes its JSON record next to
OUT (`OUT.report.json`) or to the path given.

The search's flags are those of `SearchOptions` (`shlo_env.search.options`: the options
`optimize` takes, declared once). Searches go through the persistent cache (`shlo_env.api.cache`,
the one `optimize` and `shlo_env.jit` use; `--cache-dir`, or `--no-cache`): a hit is checked
against the input module on a seeded random input set, then written without searching.
"""

from __future__ import annotations

import argparse
import bz2
import dataclasses
import gzip
import json
import lzma
import sys
from typing import TYPE_CHECKING, Any, Callable
from pathlib import Path

from shlo_env.ir.program import BYTECODE_MAGIC, Program, ProgramError, parse_module, program_from_module
from shlo_env.search.options import add_arguments as add_search_arguments
from shlo_env.search.options import from_args

if TYPE_CHECKING:
    from shlo_env.api.cache import Entry
    from shlo_env.search.options import SearchOptions
    from shlo_env.search.program_search import ProgramResult

_COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {".xz": lzma.compress, ".gz": gzip.compress, ".bz2": bz2.compress}


def _zstd_decompress(data: bytes) -> bytes:
    try:
        from compression import zstd  # Python 3.14+

        return zstd.decompress(data)
    except ImportError:
        pass
    try:
        import zstandard
    except ImportError:
        raise ProgramError("the input is zstd-compressed; install the `zstandard` package to read it, "
                           "or decompress it first (zstd -d)") from None
    return zstandard.ZstdDecompressor().decompressobj().decompress(data)


def decompress(data: bytes) -> bytes:
    """`data` uncompressed (xz, gzip, bzip2 and zstd are recognized by their magic bytes)."""
    try:
        if data.startswith(b"\xfd7zXZ\x00"):
            return lzma.decompress(data)
        if data.startswith(b"\x1f\x8b"):
            return gzip.decompress(data)
        if data.startswith(b"BZh"):
            return bz2.decompress(data)
    except (lzma.LZMAError, OSError, EOFError) as e:
        raise ProgramError(f"corrupt compressed input: {e}") from None
    if data.startswith(b"\x28\xb5\x2f\xfd"):
        return _zstd_decompress(data)
    return data


def read_program(source: str) -> Program:
    """A Program from a file path, or from stdin for `-`."""
    if source == "-":
        data, name, origin = sys.stdin.buffer.read(), "stdin", "<stdin>"
    else:
        path = Path(source)
        if not path.is_file():
            raise ProgramError(f"no such file: {path}")
        data, name, origin = path.read_bytes(), path.name.split(".")[0] or "main", str(path)
    data = decompress(data)
    if not data.strip():
        raise ProgramError(f"{origin} is empty")
    text_or_bytes: str | bytes = data
    if not data.startswith(BYTECODE_MAGIC):
        try:
            text_or_bytes = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ProgramError(f"{origin} is neither MLIR text nor MLIR bytecode") from None
    module = parse_module(text_or_bytes, what=origin)
    return program_from_module(module, name=name, source=origin)


def write_program(program: Program, dest: str) -> None:
    """Bytecode for `.mlirbc` (before an optional compression suffix), text otherwise."""
    if dest == "-":
        sys.stdout.write(program.text())
        sys.stdout.flush()
        return
    path = Path(dest)
    compress = _COMPRESSORS.get(path.suffix)
    inner = path.with_suffix("") if compress else path
    data = program.bytecode() if inner.suffix == ".mlirbc" else program.text().encode()
    tmp = path.with_name(path.name + ".partial")  # renamed once complete: Ctrl-C never leaves half a file
    try:
        tmp.write_bytes(compress(data) if compress else data)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help="a .mlir/.mlirbc file (optionally .xz/.gz/.bz2/.zst compressed), or - for stdin")
    p.add_argument("-o", "--output", required=True,
                   help="where to write the optimized module: .mlirbc for bytecode, else text "
                        "(a .xz/.gz/.bz2 suffix compresses); - for stdout")
    p.add_argument("--report", nargs="?", const="", default=None, metavar="PATH",
                   help="write the search's JSON report (default path: OUTPUT.report.json)")
    p.add_argument("--progress", action="store_true", help="a live progress line on stderr")
    p.add_argument("--no-cache", action="store_true",
                   help="search without the persistent cache of searches (neither read nor written)")
    p.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="the cache directory (default: $SHLO_ENV_CACHE_DIR, else the user cache directory)")
    p.set_defaults(_search_options=add_search_arguments(p))


def run(args: argparse.Namespace) -> int:
    from shlo_env.api import cache as search_cache
    from shlo_env.api.optimize import store_search
    from shlo_env.search import strategies
    from shlo_env.search.program_search import optimize_program

    def fail(message: str) -> int:
        print(f"shlo-env optimize: error: {message}", file=sys.stderr)
        return 2

    try:
        options = from_args(args, args._search_options)
    except (TypeError, ValueError) as e:
        return fail(str(e))
    if options.strategy != "auto" and options.strategy not in strategies():
        return fail(f"unknown strategy {options.strategy!r}; known: auto, {', '.join(strategies())}")
    if options.budget_s <= 0:
        return fail("--budget must be positive")
    report_path = args.report
    if report_path == "":
        if args.output == "-":
            return fail("--report needs a path when the output is stdout")
        report_path = args.output + ".report.json"
    try:
        options.result_key()  # resolves the patterns, passes and XLA options named: bad names fail here
        program = read_program(args.input)
    except (ProgramError, KeyError, ValueError) as e:
        return fail(str(e).strip("'\""))
    options = options.with_(name=options.name or program.name)
    store = None if args.no_cache else search_cache.open_cache(args.cache_dir or True)
    key = search_cache.search_key(program, options) if store is not None else None
    entry = store.get(key) if store is not None and key is not None else None
    res = _from_cache(program, entry, options) if entry is not None else None
    cache = "hit" if res is not None else ""
    if res is None:
        res = optimize_program(program, options, progress=args.progress)
        if res.status != "ok" or res.program is None:
            return fail(res.error or "the search returned no program")
        if store is not None and key is not None and store_search(store, _entry(key, res), res.name):
            cache = "stored"
    assert res.program is not None
    try:
        write_program(res.program, args.output)
    except OSError as e:
        return fail(f"cannot write {args.output}: {e}")
    if report_path:
        record = {"input": args.input, "output": args.output, **res.record(), "cache": cache}
        Path(report_path).write_text(json.dumps(record, indent=2, default=str))
    print(str(res), file=sys.stderr)
    if cache == "hit":
        print("persistent cache: hit (searched in an earlier run, checked against the input module on a seeded "
              "random input set)", file=sys.stderr)
    return 0


def _entry(key: dict, res: ProgramResult) -> Entry:
    """The cache entry of a finished search (the same entry `optimize` writes for a function)."""
    from shlo_env.api.cache import Entry

    kept = res.returned_original or res.program is None
    return Entry(key=key, name=res.name, program=None if kept else res.program.text(),  # type: ignore[union-attr]
                 actions=res.actions, numerics=res.numerics, optimized_hash="" if kept else res.best_hash,
                 report=res.record())


def _from_cache(program: Program, entry: Entry, options: SearchOptions) -> ProgramResult | None:
    """The cached search as a result, after the check `optimize` makes of a hit (here against
    the input module itself, compiled in this process); None (with a CacheWarning) if it fails."""
    import warnings

    from shlo_env.execute import runtime
    from shlo_env.api.cache import CacheWarning
    from shlo_env.ir.hashing import dag_hash
    from shlo_env.api.optimize import check_cached
    from shlo_env.search.program_search import ProgramResult

    try:
        stored = dict(entry.report)
        chosen = program
        if entry.program is not None:
            chosen = dataclasses.replace(program, module=parse_module(entry.program, what="cached program"),
                                         applied=tuple(stored.get("applied") or ()))
            if dag_hash(chosen) != entry.optimized_hash:
                raise ValueError("the stored program does not match its hash")
            original, optimized = runtime.compile(program), runtime.compile(chosen, entry.disabled_passes)
            check_cached(program, entry.numerics, lambda flat: runtime.execute(original, flat),
                         lambda flat: runtime.execute(optimized, flat))
        fields = {f.name: f for f in dataclasses.fields(ProgramResult) if f.init}
        names = set(fields)
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) and isinstance(fields[k].default, tuple) else v
                                  for k, v in stored.items() if k in fields}
        res = ProgramResult(**values)
        if "disabled_passes" in stored and "disabled_passes" not in names:
            res.disabled_passes = tuple(stored["disabled_passes"])  # the record's text form of the actions
    except Exception as e:  # noqa: BLE001 - a bad entry means: search again
        warnings.warn(f"shlo_env cache: ignoring the cached search of {program.name} ({type(e).__name__}: {e}); "
                      f"searching again", CacheWarning, stacklevel=2)
        return None
    res.name = options.name or program.name
    res.status, res.error, res.program = "ok", "", chosen
    res.original_hash = dag_hash(program)
    res.best_hash = res.original_hash if entry.program is None else entry.optimized_hash
    res.returned_original = entry.program is None
    res.candidates_evaluated, res.cache_hits, res.search_s, res.total_s = 0, 0, 0.0, 0.0
    return res
