"""`shlo-env optimize IN -o OUT`: a StableHLO file in, the optimized module out.

    shlo-env optimize model.mlir -o model.opt.mlirbc --budget 60 --report
    cat model.mlir.xz | shlo-env optimize - -o - > model.opt.mlir

IN is `.mlir` text, `.mlirbc` bytecode (or a StableHLO portable artifact), optionally compressed
with xz, gzip, bzip2 or zstd (recognized by content, so stdin works too); `-` reads stdin. OUT's
extension picks the format (`.mlirbc` bytecode, else text; a trailing `.xz`/`.gz`/`.bz2`
compresses); `-` writes text to stdout. The search is `search_program`, the one every front end
calls (`shlo_env.api.search_program`: every candidate verified against the input module before it
is timed); `--report` writes its JSON record next to OUT (`OUT.report.json`) or to the path given.

The search's flags are those of `SearchOptions` (`shlo_env.search.options`: the options
`optimize` takes, declared once). Searches go through the persistent cache (`shlo_env.api.cache`,
the one `optimize` and `shlo_env.jit` use; `--cache-dir`, or `--no-cache`): a hit is checked
against the input module on a seeded random input set, then written without searching.
"""

from __future__ import annotations

import argparse
import bz2
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
    from shlo_env.search.result import ProgramResult

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


class _ModuleOnly:
    """A module written as it is (`write_program`): its text and bytecode."""

    def __init__(self, module):
        self.module = module

    def text(self) -> str:
        return str(self.module.operation.get_asm())

    def bytecode(self) -> bytes:
        import io

        buf = io.BytesIO()
        self.module.operation.write_bytecode(buf)
        return buf.getvalue()


def read_module(source: str):
    """(parsed module, name, origin) from a file path, or from stdin for `-`."""
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
    return parse_module(text_or_bytes, what=origin), name, origin


def read_program(source: str) -> Program:
    """A Program from a file path, or from stdin for `-`."""
    module, name, origin = read_module(source)
    return program_from_module(module, name=name, source=origin)


def read_inputs(path: str, program: Program) -> tuple:
    """The arrays of an `.npz` file (`np.savez(path, *arrays)`, in the file's order) as the
    program's example inputs, checked against its signature."""
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = [data[k] for k in data.files]
    except (OSError, ValueError) as e:
        raise ProgramError(f"cannot read --inputs {path}: {e}") from None
    return program.checked_example_args(arrays, what=f"--inputs {path}")


def callback_refusal(module) -> str | None:
    """Why a module cannot be searched from a file, or None: its host callbacks are Python
    functions of the process that lowered it (`shlo_env.ir.effects`)."""
    from shlo_env.ir import effects

    if effects.has_host_callbacks(module):
        return (f"the module calls {effects.describe_callbacks(module)}: Python functions of the process "
                f"that lowered it, which jax refers to by index into a list it hands to XLA when it compiles "
                f"the module. A file cannot carry them, so the module cannot run here and is not searched. "
                f"In that process, shlo_env.optimize(fn, *args) or shlo_env.jit(fn) search around host "
                f"callbacks and keep them working (docs/side_effects.md)")
    return None


def write_program(program: Program | Any, dest: str) -> None:
    """Bytecode for `.mlirbc` (before an optional compression suffix), text otherwise.
    `program` may also be a bare `ir.Module` (a module no Program holds, written unchanged)."""
    if not isinstance(program, Program):
        program = _ModuleOnly(program)
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
    p.add_argument("--dump", default=None, metavar="DIR",
                   help="write original.mlir, winner.mlir, report.json and candidates.jsonl (every candidate: "
                        "hash, rewrites, tier, ratio, why rejected) into DIR (default: $SHLO_ENV_DUMP_DIR/NAME-HASH)")
    p.add_argument("--explain", action="store_true",
                   help="print what changed and where (a diff of the StableHLO), or why nothing did")
    p.add_argument("--export", default=None, metavar="DIR",
                   help="also write a portable artifact (jax.export module + XLA actions + report) that "
                        "shlo_env.load_optimized(DIR) runs")
    p.add_argument("--inputs", default=None, metavar="FILE.npz",
                   help="the module's inputs (np.savez(FILE, *arrays), in argument order): the search "
                        "verifies on them and on small perturbations of them instead of N(0,1) draws "
                        "(for a module whose random inputs mean nothing, e.g. weights as arguments)")
    p.set_defaults(_search_options=add_search_arguments(p, with_mode=True))


def run(args: argparse.Namespace) -> int:
    from shlo_env.api import cache as search_cache
    from shlo_env.api import search_program as front_end
    from shlo_env.search import strategies

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
        module, name, origin = read_module(args.input)
        refusal = callback_refusal(module)
        if refusal is not None:
            return _unchanged(args, report_path, module, name, f"not searched: {refusal}", fail)
        program = program_from_module(module, name=name, source=origin)
        if args.inputs:
            program.example_args = read_inputs(args.inputs, program)
            program.perturb_examples = True
    except (ProgramError, KeyError, ValueError) as e:
        return fail(str(e).strip("'\""))
    options = options.with_(name=options.name or program.name)
    store = None if args.no_cache else search_cache.open_cache(args.cache_dir or True)
    res, cache = front_end.search_program(program, options, cache=store, progress=bool(args.progress),
                                          dump_to=args.dump)
    if res.status != "ok" or res.program is None:  # nothing searched: as `optimize` returns jax.jit
        why = (res.error if res.status != "ok" else res.reason) or "the search returned no program"
        return _unchanged(args, report_path, program, program.name, why, fail, res)
    assert res.program is not None
    try:
        write_program(res.program, args.output)
    except OSError as e:
        return fail(f"cannot write {args.output}: {e}")
    if report_path:
        record = {"input": args.input, "output": args.output, **res.record(), "cache": cache}
        Path(report_path).write_text(json.dumps(record, indent=2, default=str))
    if args.export:
        try:
            _export(args.export, program, res)
        except (OSError, ValueError) as e:
            return fail(f"cannot write the export: {e}")
    print(str(res), file=sys.stderr)
    if args.explain:
        from shlo_env.api.explain import explain

        print(explain(res, program, None if res.returned_original else res.program), file=sys.stderr)
    if cache == front_end.HIT:
        print("persistent cache: hit (searched in an earlier run, checked against the input module on a seeded "
              "random input set)", file=sys.stderr)
    return 0


def _unchanged(args: argparse.Namespace, report_path: str | None, module, name: str, reason: str,
               fail: Callable[[str], int], res: ProgramResult | None = None) -> int:
    """Nothing to search: the input written as it came, the reason said on stderr, exit 0."""
    try:
        write_program(module, args.output)
    except OSError as e:
        return fail(f"cannot write {args.output}: {e}")
    if report_path:
        record = res.record() if res is not None else {"name": name, "status": "ok", "applied": []}
        record = {"input": args.input, "output": args.output, **record, "returned_original": True,
                  "reason": reason, "cache": ""}
        Path(report_path).write_text(json.dumps(record, indent=2, default=str))
    print(f"shlo-env optimize: {name}: written unchanged: {reason}", file=sys.stderr)
    return 0


def _export(folder: str, program: Program, res: ProgramResult) -> None:
    """`--export DIR`, after the output is written (the dump folder is the search's:
    `shlo_env.api.search_program`)."""
    from shlo_env.api.export import write_artifact

    winner = None if res.returned_original or res.program is None else res.program
    write_artifact(folder, winner if winner is not None else program,
                   actions=res.actions if winner is not None else (), numerics=res.numerics,
                   report=res.record(), report_text=str(res), name=res.name)
