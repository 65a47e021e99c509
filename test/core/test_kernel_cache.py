"""The compiled kernels' disk cache is keyed on every module of ``core/compiled/``.

numba checks a cached function against the one source file that defines it; the kernels
are compiled together with helpers from the package's other modules, so an edit there
must invalidate them too (``compiled.numba_support``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("numba", reason="the compiled backend needs numba (requirements/core.txt)")

from direction_up_ik.core.compiled import iteration, numba_support, search_rounds, seed_scan  # noqa: E402

ENTRY_POINTS = {"iteration.run_serial": iteration.run_serial, "iteration.solve_rows": iteration.solve_rows,
                "iteration.solve_block": iteration.solve_block,
                "search_rounds.run_search": search_rounds.run_search,
                "search_rounds.search_rows": search_rounds.search_rows,
                "seed_scan.nearest_ranks_into": seed_scan.nearest_ranks_into}


def test_an_edit_of_any_module_changes_the_fingerprint(tmp_path):
    copy = tmp_path / "compiled"
    shutil.copytree(numba_support.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    original = numba_support.source_fingerprint(copy)
    assert original == numba_support.source_fingerprint(numba_support.PACKAGE_DIR)
    for module in ("vector_math.py", "step.py", "layout.py"):  # helpers only: no kernel defined there
        path = copy / module
        text = path.read_text(encoding="utf-8")
        path.write_text(text + "\n# edited\n", encoding="utf-8")
        numba_support.source_fingerprint.cache_clear()
        assert numba_support.source_fingerprint(copy) != original, module
        path.write_text(text, encoding="utf-8")
        numba_support.source_fingerprint.cache_clear()
        assert numba_support.source_fingerprint(copy) == original


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_every_kernel_entry_point_uses_the_package_fingerprint(name):
    cache = ENTRY_POINTS[name]._cache
    assert isinstance(cache, numba_support.KernelCache), f"{name}: {type(cache).__name__}"
    assert cache._impl.locator.get_source_stamp() == numba_support.source_fingerprint()


def test_the_modules_left_out_of_the_fingerprint_hold_no_compiled_code():
    for name in numba_support.PYTHON_SIDE:
        text = (numba_support.PACKAGE_DIR / name).read_text(encoding="utf-8")
        for marker in ("@jitable", "@njit", "njit_cached(", "@intrinsic", "register_jitable"):
            assert marker not in text, f"{name} holds compiled code ({marker}): take it out of PYTHON_SIDE"


def test_a_warm_cache_is_told_from_a_cold_one(tmp_path):
    """``compiled.cache_is_warm``: what a process decides on before loading (a second) or
    compiling (minutes) the kernels; here in fresh interpreters, against an empty cache folder."""
    code = "from direction_up_ik.core import compiled; print(compiled.cache_is_warm())"
    cold = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path)),
                          capture_output=True, text=True, timeout=600)
    assert cold.stdout.strip().splitlines()[-1] == "False", cold.stderr
    warm = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert warm.stdout.strip().splitlines()[-1] == "True", warm.stderr  # the test session warmed it


def test_the_collision_kernels_are_cached_on_their_own():
    """compiled/collision.py: outside the solver kernels' fingerprint (an edit there does not
    recompile them), so it must not use the other modules' helpers (numba would not see their
    edits), and numba caches it against its own file."""
    from direction_up_ik.core.compiled import collision as kernels
    assert numba_support.SEPARATELY_CACHED == ("collision.py",)
    text = (numba_support.PACKAGE_DIR / "collision.py").read_text(encoding="utf-8")
    assert "from ." not in text and "import direction_up_ik" not in text
    for kernel in kernels.ENTRY_POINTS:
        assert kernel._cache is not None and not isinstance(kernel._cache, numba_support.KernelCache)


def test_an_edit_of_the_collision_kernels_keeps_the_fingerprint(tmp_path):
    copy = tmp_path / "compiled"
    shutil.copytree(numba_support.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    original = numba_support.source_fingerprint(copy)
    (copy / "collision.py").write_text("# edited\n", encoding="utf-8")
    numba_support.source_fingerprint.cache_clear()
    try:
        assert numba_support.source_fingerprint(copy) == original
    finally:
        numba_support.source_fingerprint.cache_clear()


_NATIVE_CALLER = r'''
import re, sys
import numpy as np
from direction_up_ik.core.compiled.numba_support import native_call, njit_cached

@njit_cached(nogil=True, _nrt=False)
def weighted_sum(values, scale):
    total = 0.0
    for i in range(values.shape[0]):
        total += scale * values[i]
    return total

call_weighted_sum = native_call(weighted_sum)

@njit_cached
def caller(values):
    return call_weighted_sum((values, 2)) + 1.0  # the literal 2 binds to the int64 compile

if __name__ == "__main__":
    result = caller(np.arange(4.0))
    symbol = weighted_sum.overloads[weighted_sum.signatures[0]].fndesc.mangled_name
    loaded = bool(caller.stats.cache_hits)
    defines = None if loaded else bool(re.search("define[^\\n]*@" + re.escape(symbol) + "\\(",
                                                    caller.inspect_llvm(caller.signatures[0])))
    print(result, loaded, len(weighted_sum.signatures), defines)
'''


def test_a_native_call_links_no_code_and_reloads_its_kernel_from_the_cache(tmp_path):
    """``numba_support.native_call``: the caller's module declares the kernel's symbol instead of
    linking its code (the solver is then optimised once, not in every caller), and a caller
    loaded from the disk cache in a fresh process loads the kernel first and calls it."""
    (tmp_path / "native_caller.py").write_text(_NATIVE_CALLER, encoding="utf-8")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    runs = [subprocess.run([sys.executable, "native_caller.py"], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=600) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    (compiled, *first), (loaded, *second) = (run.stdout.split() for run in runs)
    assert float(compiled) == float(loaded) == 2.0 * 6.0 + 1.0
    assert first == ["False", "1", "False"]  # compiled here; the kernel's code not defined in the caller
    assert second == ["True", "1", "None"]  # loaded, and the kernel with it


def test_a_helper_gets_no_machine_code_of_its_own_until_asked():
    """``numba_support.jitable`` helpers: kernels link their IR, so numba's JIT engine never
    emits their own library (``_IRLibrary``), unless ``own_code``; a pointer into it, if
    asked for, still works."""
    import ctypes
    import gc

    from numba import njit
    from numba.core import codegen

    @numba_support.jitable
    def twice_plus(x, y):
        return 2.0 * x + y

    @numba_support.jitable(own_code=True)
    def halved(x):
        return 0.5 * x

    @njit
    def kernel(x):
        return twice_plus(x, 1.0) - 1.0 + halved(0.0)

    assert kernel(3.0) == 6.0
    libraries = {(type(o), o.name.rsplit(".", 1)[-1]): o for o in gc.get_objects()
                 if type(o) in (numba_support._IRLibrary, codegen.JITCodeLibrary)}
    library = libraries[numba_support._IRLibrary, "twice_plus"]
    own = libraries[codegen.JITCodeLibrary, "halved"]  # own_code: emitted, as numba does
    assert (numba_support._IRLibrary, "halved") not in libraries
    engine = library.codegen._engine
    assert all(engine.is_symbol_defined(fn.name) for fn in own.get_defined_functions())
    names = [fn.name for fn in library.get_defined_functions()]
    assert names and not library._emitted
    assert not any(engine.is_symbol_defined(name) for name in names)
    c_wrapper = next(name for name in names if name.startswith("cfunc."))
    address = library.get_pointer_to_function(c_wrapper)
    assert library._emitted and address
    assert ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double, ctypes.c_double)(address)(3.0, 0.5) == 6.5


def test_a_helper_called_from_an_inlined_and_a_plain_helper_compiles_once():
    """numba keys a helper's compile on its caller's flags, ``forceinline`` among them;
    ``numba_support`` leaves that one out for ``jitable`` helpers (they set it themselves), so
    the solver's FK is compiled once, not once per kind of caller."""
    from numba import njit
    from numba.core.registry import cpu_target

    @numba_support.jitable
    def leaf(x):
        return x + 1.0

    @numba_support.jitable(force_inline=True)
    def inlined(x):
        return leaf(x) * 2.0

    @numba_support.jitable
    def plain(x):
        return leaf(x) * 3.0

    @njit
    def kernel(x):
        return inlined(x) + plain(x)

    assert kernel(1.0) == 10.0
    templates = cpu_target.typing_context.resolve_value_type(leaf).templates
    assert len([key for t in templates for key, (impl, _) in t._impl_cache.items() if impl is not None]) == 1


def test_a_helper_called_from_kernels_with_and_without_a_python_wrapper_compiles_once():
    """A kernel that releases the GIL and one without a Python wrapper of its own (called only
    through its symbol) differ in flags that do not touch a helper's code: the helper is
    compiled once for both (the seed scan's ``nearest_into``, called from ``search_rows`` and
    from ``nearest_ranks_into``)."""
    from numba import njit
    from numba.core.registry import cpu_target

    @numba_support.jitable
    def helper(x):
        return x * 5.0

    @njit(nogil=True)
    def with_wrapper(x):
        return helper(x)

    @njit(no_cpython_wrapper=True)
    def without_wrapper(x):
        return helper(x) + 1.0

    @njit
    def caller(x):
        return without_wrapper(x)

    assert with_wrapper(1.0) == 5.0 and caller(1.0) == 6.0
    templates = cpu_target.typing_context.resolve_value_type(helper).templates
    assert len([key for t in templates for key, (impl, _) in t._impl_cache.items() if impl is not None]) == 1


def test_the_quicker_config_values_are_numbas():
    """``numba_support._config_values`` stands for numba's ``TargetConfig.values`` (built on
    every look-up of its typing caches): the same values in the same order."""
    from numba.core.compiler import Flags

    flags = Flags()
    assert list(numba_support._config_values(flags).items()) == list(numba_support._numba_config_values(flags).items())
    flags.nrt, flags.error_model, flags.forceinline = True, "numpy", True
    values = numba_support._config_values(flags)
    assert list(values.items()) == list(numba_support._numba_config_values(flags).items())
    assert values["nrt"] is True and values["error_model"] == "numpy"


def test_the_numba_patches_are_in_place_on_the_pinned_numba():
    """``numba_support`` patches numba's internals on the version they were written against
    only; the pinned numba must be that one, so a bump of the pin fails here until the
    patches are checked again (docs/performance.md, "Where the first compile goes")."""
    import pathlib
    import re

    import numba
    from numba.core import cpu, targetconfig
    from numba.core.typing import templates

    pinned = re.search(r"^numba==(\d+\.\d+)\.", (pathlib.Path(__file__).parents[2] / "requirements" / "core.txt")
                       .read_text(encoding="utf-8"), re.M).group(1)
    assert numba.__version__.startswith(pinned + ".") and pinned == "0.68"
    assert numba_support.NUMBA_PATCHED
    assert cpu.CPUContext.get_executable is numba_support._get_executable
    assert templates._OverloadFunctionTemplate._get_impl is numba_support._get_impl
    assert targetconfig.TargetConfig.values is numba_support._config_values


def test_a_helper_name_registered_twice_is_refused():
    """numba names a compiled helper by module and qualified name, and ``own_code`` is looked up
    by that name: a second helper of the same name (a copy of a function) would share it."""
    import types

    def helper(x):
        return x

    numba_support.jitable(helper)
    copy = types.FunctionType(helper.__code__, helper.__globals__, "copy")  # __qualname__ still helper's
    with pytest.raises(ValueError, match=r"jitable helper .*helper registered twice: give each copy a __qualname__"):
        numba_support.jitable(own_code=True)(copy)
