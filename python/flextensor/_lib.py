"""The preloaded libflextensor, through ctypes (include/flextensor.h)."""
import ctypes
import os

HOW_TO_RUN = (
    "libflextensor is not preloaded into this process: run the program as "
    "`flextensor-run [options] -- python ...` (or `python -m flextensor run "
    "[options] -- python ...`), or with LD_PRELOAD=/path/to/libflextensor.so "
    "FT_ENABLED=1"
)


class NotPreloadedError(RuntimeError):
    """The library is not preloaded (or FT_ENABLED=0): nothing to call."""


_lib = None
_looked = False


def _bind(lib):
    c = ctypes
    sig = {
        "ft_version": (c.c_char_p, []),
        "ft_is_observing": (c.c_int, []),
        "ft_stat_get": (c.c_int, [c.c_char_p, c.POINTER(c.c_ulonglong)]),
        "ft_stat_name": (c.c_char_p, [c.c_int]),
        "ft_mark_pass": (c.c_longlong, []),
        "ft_phase": (c.c_int, []),
        "ft_iters_before_inference": (c.c_ulonglong, []),
        "ft_save_profile": (c.c_int, [c.c_char_p]),
        "ft_load_profile": (c.c_int, [c.c_char_p]),
        "ft_offload_timing_collect": (c.c_long, [c.c_char_p, c.c_ulong]),
        "ft_offload_timing_reset": (c.c_int, []),
        "ft_offload_timing_update": (c.c_int, []),
        "ft_flush_trace": (c.c_int, []),
        "ft_declare_tensor": (c.c_int, [c.c_void_p, c.c_ulonglong, c.c_char_p, c.c_int]),
        "ft_declare_done": (c.c_int, []),
        "ft_option_get": (c.c_int, [c.c_char_p, c.c_char_p, c.c_ulong]),
        "ft_options_check": (c.c_int, [c.c_void_p, c.c_void_p, c.c_int, c.c_char_p, c.c_ulong]),
        "ft_options_set": (c.c_int, [c.c_void_p, c.c_void_p, c.c_int, c.c_char_p, c.c_ulong]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    return lib


def library(required=True):
    """The preloaded library, or None (required: NotPreloadedError)."""
    global _lib, _looked
    if not _looked:
        _looked = True
        try:
            # the process's global scope: a preloaded object is in it, a
            # library merely installed is not
            glob = ctypes.CDLL(None)
            if hasattr(glob, "ft_declare_done"):
                _lib = _bind(glob)
        except OSError:
            _lib = None
    if _lib is None and required:
        raise NotPreloadedError(HOW_TO_RUN)
    return _lib


def _started(lib):
    # the library starts at the first CUDA call, or at a call of its API
    # that needs it (ft_option_get is one); ft_is_observing alone reports
    # it idle until then
    lib.ft_option_get(b"enabled", None, 0)
    return lib


def observing():
    """The library is preloaded and observes CUDA (FT_ENABLED=1, a driver)."""
    lib = library(required=False)
    return bool(lib and _started(lib).ft_is_observing())


def require_observing():
    lib = library()
    if not _started(lib).ft_is_observing():
        raise NotPreloadedError(
            "libflextensor is preloaded but does not observe CUDA in this process "
            "(FT_ENABLED is %s, or the CUDA driver was not found): run with "
            "FT_ENABLED=1 (flextensor-run sets it)" % os.environ.get("FT_ENABLED", "unset"))
    return lib


def text_call(fn, *args, size=4096):
    """fn(*args, buf, size) -> (rc, text)."""
    buf = ctypes.create_string_buffer(size)
    rc = fn(*args, buf, size)
    return rc, buf.value.decode("utf-8", "replace")


def option(name):
    """The running value of option name, as the library writes it."""
    rc, text = text_call(library().ft_option_get, name.encode())
    if rc < 0:
        raise KeyError(name)
    return text
