"""FlexTensor for Python: the seed's API on top of the preloaded libflextensor.

The library offloads without any of this (`flextensor-run -- python x.py`).
This package lets a program say what it knows: offload(model) declares the
model's parameters and buffers (no guessing which memory holds weights;
traps named after modules) and marks each forward as a pass (no pass
detection), and the timing and profile calls of the seed work on it.

    import flextensor as ft
    model = ft.offload(model, config=ft.OffloadConfig(offload_timing="eager"))
    for _ in range(ft.get_offload_manager().iters_before_inference):
        model(x)

Every call that needs the library raises NotPreloadedError when the program
was not started under it (`flextensor-run -- python ...`).
"""
import ctypes
import os
import threading

from . import _lib
from ._lib import NotPreloadedError
from .config import OffloadConfig
from .timing import OffloadTimingReport, format_offload_timing_table

__all__ = [
    "OffloadConfig", "OffloadManager", "OffloadTimingReport", "NotPreloadedError",
    "offload", "get_offload_manager", "mark_pass", "reset_offload_timing",
    "collect_offload_timing", "update_offload_timing", "format_offload_timing_table",
    "save_profile", "load_profile", "stats", "version", "is_observing",
]

PHASES = ("DISCOVERY", "PROFILING", "INFERENCE")


def version():
    """The preloaded library's version ("0.2.0")."""
    return _lib.library().ft_version().decode()


def is_observing():
    """True when the library is preloaded and observes CUDA in this process."""
    return _lib.observing()


def stats():
    """Every counter of the library: {name: value} (docs/counters.md)."""
    lib = _lib.library()
    out, i = {}, 0
    while True:
        name = lib.ft_stat_name(i)
        if not name:
            return out
        v = ctypes.c_ulonglong()
        lib.ft_stat_get(name, ctypes.byref(v))
        out[name.decode()] = v.value
        i += 1


def mark_pass():
    """Ends one pass (one forward).  offload() registers a forward hook that
    calls it; call it yourself only for work that is no module's forward.
    Returns the number of passes so far."""
    n = _lib.require_observing().ft_mark_pass()
    return int(n)


class OffloadManager:
    """What the library knows of this process's offloading (one manager: the
    library serves one device per process)."""

    def __init__(self, name):
        self.name = name
        self.config = None
        self.models = []
        self.declared_at = None  # the tensors' addresses when declared

    @property
    def iters_before_inference(self):
        """Forwards to run, from now, before INFERENCE: after offload() (the
        model declared) max(1, discovery_iters) + max(1, profiling_iters);
        without a declaration also the passes before discovery starts.  Read
        it right after offload(), as the seed's loop does."""
        return int(_lib.require_observing().ft_iters_before_inference())

    @property
    def phase(self):
        """"DISCOVERY", "PROFILING" or "INFERENCE"."""
        p = _lib.require_observing().ft_phase()
        return PHASES[p] if 0 <= p < 3 else "NOT_INITIALIZED"

    @property
    def passes(self):
        """Passes the library has seen end."""
        s = stats()
        return s.get("passes_eager", 0) + s.get("passes_graph", 0) + s.get("passes_marked", 0)

    def stats(self):
        return stats()

    def __repr__(self):
        return "<OffloadManager %r phase=%s>" % (
            self.name, self.phase if _lib.observing() else "not observing")


_manager = None
_lock = threading.Lock()


def get_offload_manager(name="default"):
    """The manager: the library learns and offloads once per process (one
    device), so every name returns the same one."""
    global _manager
    _lib.require_observing()
    with _lock:
        if _manager is None:
            _manager = OffloadManager(name)
        return _manager


def _span(t):
    """(address, bytes) of the memory t lives in: its storage (a view or an
    expanded tensor covers no more and no less than that), else its own."""
    st = getattr(t, "untyped_storage", None)
    if st is not None:
        s = st()
        return int(s.data_ptr()), int(s.nbytes())
    nbytes = getattr(t, "nbytes", None)
    if nbytes is None:
        nbytes = t.numel() * t.element_size()
    return int(t.data_ptr()), int(nbytes)


def _on_gpu(t):
    return bool(getattr(t, "is_cuda", False))


def _tensors(models):
    """(kind, name, tensor) of every parameter (0) and buffer (1) on the GPU."""
    for model in models:
        for kind, items in ((0, model.named_parameters()), (1, model.named_buffers())):
            for name, t in items:
                if t is not None and _on_gpu(t):
                    yield kind, name, t


def _declare(models):
    """Declares every parameter and buffer of models (the whole set: it
    replaces what was declared before); returns (parameters, buffers) and
    the addresses declared."""
    lib = _lib.library()
    counts, where = [0, 0], []
    for kind, name, t in _tensors(models):
        ptr, n = _span(t)
        where.append(ptr)
        if not n:
            continue
        if lib.ft_declare_tensor(ctypes.c_void_p(ptr), n, name.encode(), kind):
            raise RuntimeError(
                "offload(): the library refused to take %s: it has learnt the model "
                "already (offload() must come while it is in DISCOVERY, best before "
                "the first forward; its log says more)" % name)
        counts[kind] += 1
    return counts, where


def _moved(manager):
    """Whether a declared tensor no longer lives where it was declared
    (model.half(), model.to(), a reload after offload())."""
    where = [_span(t)[0] for _, _, t in _tensors(manager.models)]
    return where != manager.declared_at


def _hook(module, args, output):
    lib = _lib.library()
    m = _manager
    # while the library learns, the declaration must still describe the
    # model: memory a moved tensor left may hold activations by now
    if m is not None and m.declared_at is not None and lib.ft_phase() != 2 and _moved(m):
        import warnings
        if lib.ft_phase() == 0:
            try:
                (_, m.declared_at) = _declare(m.models)
                lib.ft_declare_done()
                warnings.warn("flextensor: the model's tensors moved after offload() (converted "
                              "or moved?): declared again, discovery starts over")
                return  # the declaration begins the next pass; this one is void
            except RuntimeError:
                m.declared_at = None
        else:
            m.declared_at = None
            warnings.warn("flextensor: the model's tensors moved after offload(), while the "
                          "library was profiling: what it learnt may not describe them; call "
                          "offload() right after moving or converting the model")
    lib.ft_mark_pass()


def offload(model, config=None, name="default"):
    """Declares model's parameters and buffers to the library and marks every
    forward of model as one pass; returns model (the same object: nothing is
    patched or wrapped).  config's explicit fields must match the running
    configuration where the library reads them at start (ValueError naming
    the field), and are set where it reads them at the plan.  A model on the
    CPU is moved to the GPU first (under FT_MAX_GPU_MEM_FRACTION the library
    keeps what exceeds the budget in host memory).  config.enabled=False
    leaves the model alone."""
    config = config if config is not None else OffloadConfig()
    if not isinstance(config, OffloadConfig):
        raise TypeError("offload(): config must be an OffloadConfig")
    if not config.enabled:
        return model
    lib = _lib.require_observing()
    config.validate()
    from .config import apply
    apply(config)
    params = list(model.parameters()) if hasattr(model, "parameters") else []
    if params and not all(_on_gpu(p) for p in params) and hasattr(model, "to"):
        dev = config.gpu_device
        if dev is None:
            dev = int(_lib.option("gpu_device")) if _lib.option("gpu_device") != "none" else 0
        model = model.to("cuda:%d" % dev)
    m = get_offload_manager(name)
    models = m.models + [model] if not any(x is model for x in m.models) else m.models
    counts, where = _declare(models)  # every offloaded model: the whole set
    if not counts[0]:
        raise ValueError("offload(): the model has no parameter on the GPU to offload")
    if lib.ft_declare_done():
        raise RuntimeError("offload(): the library did not take the declarations (it has "
                           "learnt the model already: offload() must come while it is in "
                           "DISCOVERY, best before the first forward; its log says more)")
    m.config = config
    m.declared_at = where
    if models is not m.models:
        m.models.append(model)
        # one mark per forward, however often offload() is called on it
        model.register_forward_hook(_hook)
    return model


def reset_offload_timing():
    """Empties the timing store (the seed: before the serving window)."""
    if _lib.require_observing().ft_offload_timing_reset():
        raise RuntimeError("reset_offload_timing(): timing is off (offload_timing='off') "
                           "or offloading has not begun")


def collect_offload_timing():
    """The report of every pass timed since the last reset or collect (the
    store is emptied), or None when timing is off, offloading has not begun
    or nothing was recorded."""
    lib = _lib.require_observing()
    # collect empties the store, so one call, with room for any table (a
    # line per trap, under 200 bytes)
    size = 4 << 20
    buf = ctypes.create_string_buffer(size)
    n = lib.ft_offload_timing_collect(buf, size)
    text = buf.value.decode("utf-8", "replace") if n >= 0 else None
    if text and n >= size:
        import warnings
        warnings.warn("flextensor: the timing table needs %d bytes; the first %d are "
                      "returned (the store is emptied either way)" % (n, size - 1))
    return OffloadTimingReport(text) if text else None


def update_offload_timing(replay_generation=-1):
    """Publishes the CUDA graph replays not published yet (offload_timing=
    'cuda_graph'): True when it did, False when graphs are not timed."""
    return _lib.require_observing().ft_offload_timing_update() >= 0


def _profile_dir(dir):
    d = dir if dir is not None else _lib.option("profile_storage_dir")
    return None if d in (None, "none") else os.fspath(d)


def save_profile(dir=None):
    """Writes profile.json into dir (default: profile_storage_dir).
    RuntimeError before INFERENCE, ValueError when read-only or no dir."""
    lib = _lib.require_observing()
    if lib.ft_phase() != 2:
        raise RuntimeError("save_profile(): the library has not reached INFERENCE (no "
                           "complete profile yet)")
    if _lib.option("profile_read_only") == "1":
        raise ValueError("save_profile(): profile_read_only is set")
    d = _profile_dir(dir)
    if d is None:
        raise ValueError("save_profile(): no directory given and profile_storage_dir is "
                         "not set")
    if lib.ft_save_profile(d.encode()):
        raise OSError("save_profile(%r) failed (the library's log says why)" % d)
    return os.path.join(d, "profile.json")


def load_profile(dir=None, model=None):
    """Reads dir/profile.json as the profile to take when discovery ends (the
    same model on the same device: no profiling).  FileNotFoundError when
    there is none, RuntimeError when the library refused it."""
    lib = _lib.require_observing()
    d = _profile_dir(dir)
    if d is None:
        raise ValueError("load_profile(): no directory given and profile_storage_dir is "
                         "not set")
    if not os.path.isfile(os.path.join(d, "profile.json")):
        raise FileNotFoundError(os.path.join(d, "profile.json"))
    if lib.ft_load_profile(d.encode()):
        raise RuntimeError("load_profile(%r): the library refused it (discovery has ended, "
                           "or the file is corrupt or of another schema; its log says "
                           "which)" % d)
    return model
