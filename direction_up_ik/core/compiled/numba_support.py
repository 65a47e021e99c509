"""numba helpers of the compiled backend: decorators, the disk cache, a clock, stack arrays.

* :func:`njit_cached` makes a kernel entry point: compiled once, kept in numba's disk cache.
  numba checks a cached kernel against the source file that defines it only, while the
  kernels here are compiled together with helpers from the other modules of this package;
  so the cache is keyed on all of them (:func:`source_fingerprint`): editing any module with
  compiled code recompiles every kernel, and a stale one is never loaded.
* :func:`jitable` marks a helper that numba compiles into the kernels calling it.
* :func:`clock_ns` reads the monotonic clock inside a kernel (deadlines without the GIL).
* :func:`stack_array` gives scratch arrays to code compiled without numba's runtime.
* :func:`native_call` calls a kernel by its symbol, so that its callers do not link its code.

Three patches of numba make the first compile shorter (docs/performance.md, "Where the first
compile goes"). The first changes the kernels' code slightly (see ``own_code``), the second
drops a duplicate copy of a helper from it, the third leaves it as it is:

* :func:`jitable` helpers get no machine code of their own (:class:`_IRLibrary`, through
  ``CPUContext.get_executable``): kernels link their IR, so only the kernels and the
  iteration's helpers (``own_code``) are emitted;
* a helper is compiled once, not once per ``forceinline`` or Python-wrapper option of its
  callers (:func:`_get_impl`);
* ``TargetConfig.values`` is built without a property call per option (:func:`_config_values`).

The first two act on this package's helpers only, the third on any numba compile in the
process, with the same result as numba's. They are in place on numba 0.68 only
(:data:`NUMBA_PATCHED`).

Where the cache lives: ``__pycache__`` next to these files when it is writable, else
numba's per-user cache directory (``$XDG_CACHE_HOME/numba`` or ``~/.cache/numba``);
``NUMBA_CACHE_DIR`` overrides both. With no writable location at all the kernels are
compiled in every process.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import pathlib
import time
import weakref

from llvmlite import binding as llvm, ir
import numba
from numba import _dynfunc, njit, types
from numba.core import caching, cgutils, codegen, cpu, targetconfig
from numba.core.typing import templates
from numba.extending import intrinsic, register_jitable
from numba.np.arrayobj import populate_array

#: The folder of this package: its ``*.py`` files but :data:`PYTHON_SIDE` are the kernels'
#: cache key.
PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
#: Modules of the package that hold no compiled code (only what Python calls; tested), so
#: that editing them does not recompile the kernels.
PYTHON_SIDE = ("__init__.py", "api.py", "threads.py")
#: Modules with kernels of their own that use nothing from the other modules, cached by numba
#: against their own file (``cache=True``): editing them does not recompile the solver's kernels,
#: nor the reverse.
SEPARATELY_CACHED = ("collision.py",)


@functools.lru_cache(maxsize=None)
def source_fingerprint(folder: pathlib.Path = PACKAGE_DIR) -> str:
    """sha256 over the names and contents of the ``*.py`` files in ``folder`` (sorted) but
    :data:`PYTHON_SIDE` and :data:`SEPARATELY_CACHED`."""
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.py")):
        if path.name not in PYTHON_SIDE + SEPARATELY_CACHED:
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


class _PackageStamp:
    """A cache locator mixin whose source stamp covers the whole package, not one file."""

    def get_source_stamp(self):
        return source_fingerprint()


class _UserProvidedLocator(_PackageStamp, caching.UserProvidedCacheLocator):
    pass


class _InTreeLocator(_PackageStamp, caching.InTreeCacheLocator):
    pass


class _UserWideLocator(_PackageStamp, caching.UserWideCacheLocator):
    pass


class _KernelCacheImpl(caching.CompileResultCacheImpl):
    _locator_classes = [_UserProvidedLocator, _InTreeLocator, _UserWideLocator]


class KernelCache(caching.FunctionCache):
    """numba's per-function disk cache, keyed on :func:`source_fingerprint`."""

    _impl_class = _KernelCacheImpl


def njit_cached(fn=None, **options):
    """``numba.njit(error_model="numpy", **options)`` with a :class:`KernelCache`; bare or
    with options.

    numpy's error model: x / 0 gives inf or NaN (caught as a numerical failure, like the
    reference) instead of raising ZeroDivisionError. Without a writable cache location
    the kernel is compiled in every process instead of failing the import.
    """
    def wrap(function):
        dispatcher = njit(error_model="numpy", **options)(function)
        try:
            dispatcher._cache = KernelCache(dispatcher.py_func)
        except RuntimeError:  # "cannot cache function ...: no locator available"
            pass
        return dispatcher
    return wrap(fn) if fn is not None else wrap


#: Every :func:`jitable` helper (the Python function).
JITABLE: set = set()
#: (module, qualified name) of the :func:`jitable` helpers without machine code of their own
#: (:class:`_IRLibrary`); numba's function descriptors name a function by these.
IR_ONLY: set = set()
#: (module, qualified name) of every :func:`jitable` helper: each names one helper.
_NAMES: set = set()


def jitable(fn=None, *, force_inline: bool = False, own_code: bool = False):
    """``numba.extending.register_jitable`` with numpy's error model: a plain Python
    function that numba compiles into the kernels calling it. ``force_inline``: LLVM
    always inlines it (numba's ``forceinline``), for small helpers on hot paths. Typed once
    per signature, unlike numba's IR inlining (``inline="always"``), which types the
    helper's body again at every call site (docs/performance.md).

    ``own_code``: numba emits the helper's own machine code, as it does by default. Kernels
    never run that code, so helpers go without it (:class:`_IRLibrary`), except those of
    the solver's iteration: emitting also passes their IR through LLVM's code generation
    passes, and the kernels link that IR, measurably faster (docs/performance.md)."""
    def wrap(function):
        name = (function.__module__, function.__qualname__)
        if name in _NAMES:  # IR_ONLY would then hold both or neither
            raise ValueError(f"jitable helper {name[0]}.{name[1]} registered twice: give each copy a "
                             "__qualname__ of its own")
        _NAMES.add(name)
        if not own_code:
            IR_ONLY.add(name)
        JITABLE.add(function)
        return register_jitable(error_model="numpy", forceinline=force_inline)(function)
    return wrap(fn) if fn is not None else wrap


_numba_get_impl = templates._OverloadFunctionTemplate._get_impl


def _get_impl(template, args, kws):
    """numba's look-up of an overload's compiled implementation, for :data:`JITABLE` helpers
    without the caller's ``forceinline`` and Python-wrapper options in the key.

    numba keys the compile of a helper on the calling function's flags, and a helper called
    from both a ``force_inline`` function and another one was compiled twice. Our helpers set
    ``forceinline`` themselves, so the caller's value is not inherited and both compiles are
    the same. Whether the caller has a Python wrapper (a kernel called only through its
    symbol has none) and whether that wrapper releases the GIL do not change a helper's code
    either: kernels call helpers natively, never through a wrapper."""
    if getattr(type(template), "key", None) not in JITABLE:
        return _numba_get_impl(template, args, kws)
    flags = targetconfig.ConfigStack.top_or_none()
    if flags is not None:  # a copy: numba goes on setting the caller's flags afterwards
        flags = flags.copy()
        flags.forceinline = False
        flags.no_cpython_wrapper = True
        flags.release_gil = False
    cache_key = template.context, tuple(args), tuple(kws.items()), flags
    cached = template._impl_cache.get(cache_key)
    return cached if cached is not None else template._build_impl(cache_key, args, kws)


class _IRLibrary(codegen.JITCodeLibrary):
    """The code library of a :func:`jitable` helper: optimised like any other, but its machine
    code is emitted only if something asks for a pointer into it.

    Kernels link a helper's optimised IR into their own module, so the helper's own machine
    code never runs; numba emits it anyway, once per compiled helper (docs/performance.md,
    "Where the first compile goes")."""

    _emitted = False
    _env = None  # (its environment global's name, the environment): filled in once emitted

    def _finalize_final_module(self):
        # CPUCodeLibrary's, less adding the module to the JIT engine and emitting it
        self._finalize_dynamic_globals()
        self._verify_declare_only_symbols()
        self._finalized = True

    def get_pointer_to_function(self, name):
        self._ensure_finalized()
        if not self._emitted:
            self._emitted = True
            self._final_module._CPUCodeLibrary__library = weakref.proxy(self)  # object-cache hooks
            cleanup = self._codegen._add_module(self._final_module)
            if cleanup:
                weakref.finalize(self, cleanup)
            self._finalize_specific()
            if self._env is not None:
                self.codegen.set_env(*self._env)
        return super().get_pointer_to_function(name)


_numba_get_executable = cpu.CPUContext.get_executable


def _get_executable(context, library, fndesc, env):
    """``CPUContext.get_executable``, which emits the library's machine code to find the
    function's Python wrapper, except for :data:`IR_ONLY` helpers: their library becomes an
    :class:`_IRLibrary`. numba compiles helpers without a Python wrapper, so the function it
    makes for them holds a null pointer either way."""
    if (fndesc.modname, fndesc.qualname) not in IR_ONLY or type(library) is not codegen.JITCodeLibrary:
        return _numba_get_executable(context, library, fndesc, env)
    library.__class__ = _IRLibrary
    library._env = (context.get_env_name(fndesc), env)
    return _dynfunc.make_function(fndesc.lookup_module(), fndesc.qualname.split(".")[-1],
                                  f"compiled helper {fndesc.qualname!r}", 0, env, (library,))


_OPTION_DEFAULTS: dict = {}
_numba_config_values = targetconfig.TargetConfig.values


def _config_values(config) -> dict:
    """``TargetConfig.values()`` (every option's value by name, in the class's order), without
    its property call per option: numba builds it to hash and compare compile flags on every
    look-up of its typing caches, some 100,000 times in the kernels' first compile."""
    defaults = _OPTION_DEFAULTS.get(type(config))
    if defaults is None:
        defaults = _OPTION_DEFAULTS[type(config)] = {k: o.default for k, o in config.options.items()}
    return {**defaults, **config._values}


#: Whether the patches above are in place: on the numba they were written against (the
#: version ``requirements/core.txt`` pins), whose internals they replace. With another numba
#: (e.g. a distribution's) they are left out: the first compile is slower, nothing else.
NUMBA_PATCHED = numba.__version__.split(".")[:2] == ["0", "68"]
if NUMBA_PATCHED:
    templates._OverloadFunctionTemplate._get_impl = _get_impl
    cpu.CPUContext.get_executable = _get_executable
    targetconfig.TargetConfig.values = _config_values


#: The monotonic clock the kernels read for deadlines (``time.perf_counter``'s clock on
#: Linux); without clock_gettime this backend is not used (``api.supports``).
CLOCK = getattr(time, "CLOCK_MONOTONIC", None)


@intrinsic
def clock_ns(typingctx, clock_id):
    """``clock_gettime(clock_id)`` in nanoseconds (int64), callable from nopython code
    without the GIL (the C library symbol is resolved when the kernel is loaded)."""
    def codegen(context, builder, signature, args):
        timespec = ir.LiteralStructType([ir.IntType(64), ir.IntType(64)])  # tv_sec, tv_nsec
        fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(32), timespec.as_pointer()])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "clock_gettime")
        ts = cgutils.alloca_once(builder, timespec)
        builder.call(fn, [builder.trunc(args[0], ir.IntType(32)), ts])
        sec = builder.load(cgutils.gep_inbounds(builder, ts, 0, 0))
        nsec = builder.load(cgutils.gep_inbounds(builder, ts, 0, 1))
        return builder.add(builder.mul(sec, ir.Constant(ir.IntType(64), 1_000_000_000)), nsec)
    return types.int64(types.int64), codegen


@intrinsic
def stack_array(typingctx, length, dtype):
    """An uninitialised (length,) C array of ``dtype`` (a numba number class, e.g.
    ``np.int64``) in the calling function's stack frame; ``length`` must be an integer
    literal. Scratch for code compiled without numba's runtime (``iteration.solve_rows``),
    where ``np.empty`` is not available; it must not outlive the function."""
    if not isinstance(length, types.IntegerLiteral) or not isinstance(dtype, types.NumberClass):
        return None
    array_type = types.Array(dtype.instance_type, 1, "C")

    def codegen(context, builder, signature, args):
        item = context.get_data_type(dtype.instance_type)
        data = cgutils.alloca_once(builder, item, size=length.literal_value)
        ary = context.make_array(array_type)(context, builder)
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(item))
        populate_array(ary, data=data, shape=[context.get_constant(types.intp, length.literal_value)],
                       strides=[itemsize], itemsize=itemsize, meminfo=None)
        return ary._getvalue()
    return array_type(length, dtype), codegen


def _publish_native(module: str, name: str, argtypes: tuple):
    """Compile (or load from the cache) kernel ``module.name`` for ``argtypes`` and publish the
    symbol of its native function, which code compiled by :func:`native_call` calls."""
    kernel = getattr(importlib.import_module(module), name)
    kernel.compile(argtypes)
    result = kernel.overloads[argtypes]
    symbol = result.fndesc.mangled_name
    llvm.add_symbol(symbol, result.library.get_pointer_to_function(symbol))
    return result


#: Every kernel :func:`native_call` calls: each has a disk-cache entry of its own, which a warm
#: cache must hold too (``api.cache_is_warm``).
NATIVE_KERNELS: list = []


def native_call(kernel):
    """An intrinsic ``call(args)`` that calls ``kernel`` (an :func:`njit_cached` dispatcher of
    a module-level function) with the tuple ``args`` through its native symbol.

    A plain call links the kernel's whole code into every caller's module, where LLVM
    optimises it again; through the symbol it is compiled and optimised once
    (docs/performance.md, "Where the first compile goes"). The symbol's mangled name holds the
    argument types, so a caller can only bind to the matching compile. A caller loaded from
    the disk cache first loads the kernel (numba's ``reload_init`` hook)."""
    module, name = kernel.py_func.__module__, kernel.py_func.__name__
    NATIVE_KERNELS.append(kernel)

    @intrinsic
    def call(typingctx, args):
        argtypes = tuple(types.unliteral(t) for t in args)  # one compile for any constant
        result = _publish_native(module, name, argtypes)
        restype, symbol = result.signature.return_type, result.fndesc.mangled_name

        def codegen(context, builder, signature, llargs):
            context.active_code_library._reload_init.add(
                functools.partial(_publish_native, module, name, argtypes))
            fnty = context.call_conv.get_function_type(restype, argtypes)
            fn = cgutils.get_or_insert_function(builder.module, fnty, symbol)
            values = [context.cast(builder, value, given, wanted) for value, given, wanted
                      in zip(cgutils.unpack_tuple(builder, llargs[0]), args, argtypes)]
            status, value = context.call_conv.call_function(builder, fn, restype, argtypes, values)
            with cgutils.if_unlikely(builder, status.is_error):
                context.call_conv.return_status_propagate(builder, status)
            return value
        return restype(args), codegen
    return call
