"""Finds librmacc and declares the C API (include/rmacc.h) for ctypes.

The package binds the C ABI only, never libtorch's C++ ABI, so one copy works with every
PyTorch version (as vLLM's and SGLang's NCCL wrappers do).
"""
import ctypes
import ctypes.util
import os

UNIQUE_ID_BYTES = 128

# rmaccResult_t
SUCCESS = 0
_RESULT_NAMES = ("rmaccSuccess", "rmaccUnhandledCudaError", "rmaccSystemError",
                 "rmaccInternalError", "rmaccInvalidArgument", "rmaccInvalidUsage",
                 "rmaccRemoteError", "rmaccInProgress", "rmaccTimeout", "rmaccNetworkError")


class RmaccError(RuntimeError):
    """A call into librmacc failed. `code` is the rmaccResult_t, `result` its name, and the
    message is the library's own reason (rmaccGetLastError)."""

    def __init__(self, code, message, call=""):
        self.code = int(code)
        self.result = _RESULT_NAMES[code] if 0 <= code < len(_RESULT_NAMES) else str(code)
        self.call = call
        prefix = "%s: " % call if call else ""
        super().__init__("%s%s (%s)" % (prefix, message, self.result))


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


_LIB_NAMES = ("librmacc.so", "librmacc.so.0")


def _candidates():
    """(description, path) in search order: next to the package, RMACC_LIB, the prefix
    `cmake --install` put the package under, then the system's loader."""
    here = os.path.dirname(os.path.abspath(__file__))
    for name in _LIB_NAMES:
        yield "next to the package", os.path.join(here, name)
    env = os.environ.get("RMACC_LIB")
    if env:
        if os.path.isdir(env):
            for name in _LIB_NAMES:
                yield "RMACC_LIB", os.path.join(env, name)
        else:
            yield "RMACC_LIB", env
    try:
        from . import _install  # written by `cmake --install`
        for name in _LIB_NAMES:
            yield "install prefix", os.path.join(_install.LIBDIR, name)
    except ImportError:
        pass
    found = ctypes.util.find_library("rmacc")
    for name in ([found] if found else []) + list(_LIB_NAMES):
        yield "system", name


def _load():
    tried = []
    for where, path in _candidates():
        is_file = os.path.sep in path
        if is_file and not os.path.exists(path):
            tried.append("%s (%s: no such file)" % (path, where))
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s: %s)" % (path, where, e))
    raise ImportError(
        "rmacc: cannot load librmacc.so. Searched, in order:\n  " + "\n  ".join(tried) +
        "\nBuild it (scripts/build.sh), then either `cmake --install build`, or set "
        "RMACC_LIB to the library's path (e.g. build/librmacc.so), or run from the build tree "
        "with PYTHONPATH=build/python.")


_c = ctypes
_P = ctypes.c_void_p
_SZ = ctypes.c_size_t
_SZP = ctypes.POINTER(ctypes.c_size_t)
_IP = ctypes.POINTER(ctypes.c_int)

# name: (restype, argtypes)
_PROTOTYPES = {
    "rmaccGetErrorString": (_c.c_char_p, [_c.c_int]),
    "rmaccGetLastError": (_c.c_char_p, [_P]),
    "rmaccGetVersion": (_c.c_int, [_IP]),
    "rmaccGetUniqueId": (_c.c_int, [_c.POINTER(UniqueId)]),
    "rmaccCommInitRank": (_c.c_int, [_c.POINTER(_P), _c.c_int, UniqueId, _c.c_int]),
    "rmaccCommDestroy": (_c.c_int, [_P]),
    "rmaccCommAbort": (_c.c_int, [_P]),
    "rmaccCommGetAsyncError": (_c.c_int, [_P, _IP]),
    "rmaccCommCount": (_c.c_int, [_P, _IP]),
    "rmaccCommUserRank": (_c.c_int, [_P, _IP]),
    "rmaccCommLocalInfo": (_c.c_int, [_P, _IP, _IP, _IP, _IP]),
    "rmaccStreamSynchronize": (_c.c_int, [_P, _P]),
    "rmaccMemAlloc": (_c.c_int, [_P, _c.POINTER(_P), _SZ]),
    "rmaccMemFree": (_c.c_int, [_P, _P]),
    "rmaccAlltoAllv": (_c.c_int, [_P, _SZP, _SZP, _P, _SZP, _SZP, _c.c_int, _P, _P]),
    "rmaccBarrier": (_c.c_int, [_P, _P]),
    "rmaccTypeSize": (_SZ, [_c.c_int]),
    # DESIGN.md §4.1; absent from libraries built before it exists (see has()).
    "rmaccAlltoAllvDynamic": (_c.c_int, [_P, _P, _P, _P, _SZ, _P, _P, _c.c_int, _P, _P]),
}

lib, path = _load()
for _name, (_res, _args) in _PROTOTYPES.items():
    if hasattr(lib, _name):
        _f = getattr(lib, _name)
        _f.restype = _res
        _f.argtypes = _args


def has(name):
    """True when the loaded library exports `name` (newer API additions may be missing)."""
    return hasattr(lib, name)


def error_string(code):
    return lib.rmaccGetErrorString(code).decode(errors="replace")


def last_error(code, comm=None):
    """The communicator's last-error text for a failed call (the code's name if it has none)."""
    text = lib.rmaccGetLastError(comm).decode(errors="replace")
    return text or error_string(code)


def check(code, call, comm=None):
    """Raises RmaccError for a failed call, with the communicator's last-error text."""
    if code != SUCCESS:
        raise RmaccError(code, last_error(code, comm), call)


def version():
    v = ctypes.c_int()
    check(lib.rmaccGetVersion(ctypes.byref(v)), "rmaccGetVersion")
    return v.value
