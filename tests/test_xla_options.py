"""XLA compile options as actions: every value compiles and verifies in its tier, the search
keys and toggles them like passes, and the returned callable compiles with them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shlo_env as se
from shlo_env.execute import runtime, xla_options
from shlo_env.measure.numerics import Numerics, verify
from shlo_env.api.optimize import exported_callable
from shlo_env.search import Evaluator
from shlo_env.search.passes import normalize
from shlo_env.execute.worker import Worker


def layer(x, w, b):
    h = jnp.tanh(x @ w + b)
    return h.sum(0), jnp.max(h, axis=1)


ARGS = [np.random.default_rng(0).standard_normal(s).astype(np.float32) for s in [(64, 96), (96, 48), (48,)]]


@pytest.fixture(scope="module")
def program():
    return se.lower(layer, *ARGS)


@pytest.fixture(scope="module")
def baseline(program):
    sets = runtime.input_sets(program, num_random=1)
    exe = runtime.compile(program)
    refs = [runtime.reference_outputs(program, s) for s in sets]
    return sets, [runtime.execute(exe, s) for s in sets], refs


@pytest.mark.parametrize("token", xla_options.candidate_options("cpu", approx=True))
def test_every_cpu_option_value_compiles_and_verifies_in_its_tier(token, program, baseline):
    sets, original, refs = baseline
    exe = runtime.compile(program, (token,))
    outs = [runtime.execute(exe, s) for s in sets]
    # the tier a state with this option claims in the evaluator (any XLA action: >= REASSOCIATE)
    tier = max(xla_options.numerics((token,)), Numerics.REASSOCIATE)
    assert all(r is not None for r in refs)
    cmp = verify(outs, original, tier, refs)
    assert cmp.ok, (token, cmp.detail)


def test_gpu_options_are_listed_and_not_offered_on_cpu():
    gpu = xla_options.candidate_options("gpu")
    assert any(t.startswith("xla_gpu_autotune_level=") for t in gpu)
    assert any(t.startswith("xla_gpu_enable_triton_gemm=") for t in gpu)
    assert not set(gpu) & set(xla_options.candidate_options("cpu", approx=True))


def test_tokens_split_normalize_and_claim_tiers():
    passes, opts = xla_options.split(["algsimp", "xla_cpu_use_onednn=true", "xla_cpu_prefer_vector_width=512"])
    assert passes == ("algsimp",)
    assert opts == {"xla_cpu_use_onednn": True, "xla_cpu_prefer_vector_width": 512}
    # one value per option survives normalization
    both = normalize(["xla_cpu_prefer_vector_width=512", "xla_cpu_prefer_vector_width=128", "cse"])
    assert both == ("cse", "xla_cpu_prefer_vector_width=128")
    assert xla_options.numerics(["xla_cpu_enable_fast_math=true"]) == Numerics.APPROX
    assert xla_options.numerics(["xla_cpu_use_onednn=true"]) == Numerics.REASSOCIATE
    assert xla_options.numerics(["cse"]) == Numerics.EXACT
    # fast math is opt-in only
    assert not any("fast_math" in t for t in xla_options.resolve(True, "cpu"))
    assert xla_options.resolve("default", "cpu") == xla_options.DEFAULT_SCREEN["cpu"]
    assert xla_options.resolve("default", "cpu", ops=xla_options.DEFAULT_SCREEN_MAX_OPS) == ()  # large: none
    assert xla_options.resolve(True, "cpu", ops=10 ** 5)  # asked for: screened at any size
    assert any("fast_math" in t for t in xla_options.resolve("approx", "cpu"))
    with pytest.raises(ValueError):
        xla_options.resolve(["xla_cpu_use_onednn"], "cpu")
    assert xla_options.compiler_options(["cse", "xla_cpu_use_onednn=true"]) == {
        "xla_cpu_use_onednn": True, "xla_disable_hlo_passes": "cse"}


def test_evaluator_verifies_option_states_in_their_tier(program):
    with Evaluator(program, worker=Worker(timeout_s=120), num_random=1) as ev:
        a = ev.evaluate(program, passes=("xla_cpu_multi_thread_eigen=false",))
        assert a.ok and a.passes == ("xla_cpu_multi_thread_eigen=false",)
        assert a.numerics == Numerics.REASSOCIATE and a.key != ev.original_key
        # same HLO text as the original, yet another executable: timed, not reused
        assert a.timed and not a.same_executable_as and ev.stats.timed == 1
        b = ev.evaluate(program, passes=("xla_cpu_enable_fast_math=true",))
        assert b.numerics == Numerics.APPROX


def test_exported_callable_compiles_with_the_chosen_options(program):
    good = exported_callable(layer, ARGS, program, ("xla_cpu_prefer_vector_width=128",))
    for got, want in zip(good(*ARGS), jax.jit(layer)(*ARGS)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # The options reach XLA's compile: a value XLA rejects fails the callable's compile.
    bad = exported_callable(layer, ARGS, program, ("xla_cpu_experimental_xnn_graph_fusion_mode=NO_SUCH_MODE",))
    with pytest.raises(Exception):
        bad(*ARGS)


# --- typed actions (issue 29 item 2) -------------------------------------------------------------

def test_typed_actions_parse_and_write_their_tokens():
    from shlo_env.execute.xla_options import DisablePass, SetOption

    assert xla_options.parse("fusion") == DisablePass("fusion")
    assert xla_options.parse("xla_cpu_use_onednn=true") == SetOption("xla_cpu_use_onednn", True)
    assert xla_options.parse("xla_cpu_prefer_vector_width=128") == SetOption("xla_cpu_prefer_vector_width", 128)
    for token in ["cse", *xla_options.candidate_options("cpu", approx=True), *xla_options.candidate_options("gpu")]:
        assert xla_options.parse(token).token == token  # a token survives the round trip
    both = xla_options.normalize([SetOption("xla_cpu_prefer_vector_width", 512), "xla_cpu_prefer_vector_width=128",
                                  DisablePass("cse"), "cse"])
    assert both == (DisablePass("cse"), SetOption("xla_cpu_prefer_vector_width", 128))
    assert xla_options.compiler_options(both) == {"xla_cpu_prefer_vector_width": 128, "xla_disable_hlo_passes": "cse"}
    with pytest.raises(ValueError, match="not an XLA pass name"):
        DisablePass("a,b")


def test_a_cache_entry_of_string_actions_still_loads(tmp_path):
    """Entries written before actions were typed held a `disabled_passes` list of strings."""
    import json

    from shlo_env.api import cache as search_cache
    from shlo_env.execute.xla_options import DisablePass, SetOption

    old = {"key": {"k": 1}, "name": "f", "program": None, "numerics": "REASSOCIATE",
           "disabled_passes": ["fusion", "xla_cpu_use_onednn=true"], "format": search_cache.FORMAT,
           "report": {"applied": [], "disabled_passes": ["fusion", "xla_cpu_use_onednn=true"]}}
    entry = search_cache.Entry.from_json(json.dumps(old))
    typed = (DisablePass("fusion"), SetOption("xla_cpu_use_onednn", True))
    assert entry.actions == typed and entry.report["actions"] == typed
    assert entry.disabled_passes == ("fusion", "xla_cpu_use_onednn=true")
    again = search_cache.Entry.from_json(entry.to_json())  # written as tokens, read back typed
    assert again.actions == typed and again.report["actions"] == typed
    store = search_cache.SearchCache(tmp_path)
    path = store.path({"k": 2})
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({**old, "key": {"k": 2}, "disabled_passes": [{"bad": 1}]}))
    with pytest.warns(search_cache.CacheWarning, match="unreadable"):
        assert store.get({"k": 2}) is None  # refused with a clear warning, not a crash
