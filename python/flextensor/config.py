"""OffloadConfig: the seed's configuration object, validated by the library."""
import ctypes
import difflib

from . import _lib

# The seed's fields with upstream's defaults (shown by repr; a field left
# at its default is not sent to the library, which keeps its own FT_* value
# from the environment or the INI file).
FIELDS = {
    "enabled": True,
    "gpu_device": None,
    "pinned_memory": True,
    "discovery_iters": 1,
    "skip_discovery": False,
    "profiling_iters": 10,
    "transfer_budget_scale": 1.0,
    "transfer_mode": "allocation_block_transfer",
    "num_blocks": 4,
    "min_blocks": 4,
    "max_gpu_mem_fraction": None,
    "profile_storage_dir": None,
    "profile_read_only": False,
    "offload_timing": "off",
    "piecewise_prefetch": "warn",
    "enable_diagnostics": False,
    "shm_enabled": False,
    "shm_namespace": None,
    "shm_wait_timeout": 0.0,
    "nvme_offload_enabled": False,
    "nvme_offload_path": None,
    "nvme_transfer_mode": "posix",
    "nvme_alignment_bytes": 4096,
    # this library's own options (FT_* of the same name)
    "graph_copy": "memcpy",
    "graph_paging": "instantiate",
    "verify": False,
    "hold_ignored": True,
    "expert_paging": True,
    "vmm_min_bytes": 2097152,
    "vllm_timing_batch": "decode",
    "log_level": "warn",
    "log_file": None,
    "trace": None,
    "shm_dir": "/dev/shm",
    "nvme_host_bytes": 0,
}

# upstream fields the library refuses (it says why: FT_<NAME> is not
# supported ...), passed to it so that the message is its own
REFUSED = (
    "pinned_memory_mode", "external_compile", "enable_instrumentation", "instrumentation_output_dir",
    "unified_memory", "include_patterns", "exclude_patterns",
    "profile_mode",
)

REMOVED = {
    "release_tensors": "0.2.0", "enable_direct_mode": "0.2.0", "enable_tracing": "0.2.0",
    "rearrange_transfers": "0.2.0", "compute_transfer_gap": "0.2.0",
    "enable_untraced_tensor_discovery": "0.2.0", "enable_module_tracker": "0.2.0",
    "warmup_iters": "0.4.0", "profile_iters": "0.4.0",
}


def to_text(value):
    """A field's value as an FT_* variable would hold it."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


class OffloadConfig:
    """OffloadConfig(**fields): the seed's fields (FIELDS), each validated by
    the preloaded library as FT_<FIELD>=value is, with the same messages
    (ValueError).  Unknown names raise TypeError, removed upstream fields and
    fields the library refuses raise ValueError.  Without the library only
    the names are checked; offload() then raises NotPreloadedError."""

    def __init__(self, **kwargs):
        for name in kwargs:
            if name in REMOVED:
                raise ValueError("'%s' was removed in %s. Remove it from OffloadConfig"
                                 % (name, REMOVED[name]))
            if name not in FIELDS and name not in REFUSED and name != "load_strategy":
                near = difflib.get_close_matches(name, list(FIELDS), n=1, cutoff=0.75)
                raise TypeError("OffloadConfig has no field '%s'%s" % (
                    name, " (did you mean '%s'?)" % near[0] if near else ""))
        if "load_strategy" in kwargs:
            raise ValueError("load_strategy is not supported: libflextensor makes its plan "
                             "itself from what it measures; remove it")
        object.__setattr__(self, "_set", dict(kwargs))
        for name, default in FIELDS.items():
            object.__setattr__(self, name, kwargs.get(name, default))
        self.validate()

    def __setattr__(self, name, value):
        if name not in FIELDS:
            raise AttributeError("OffloadConfig has no field '%s'" % name)
        old = self._set.get(name, FIELDS[name])
        self._set[name] = value
        try:
            self.validate()
        except ValueError:
            self._set[name] = old
            raise
        object.__setattr__(self, name, value)

    def explicit(self):
        """The fields given explicitly: {name: value}."""
        return dict(self._set)

    def settings(self):
        """The explicit fields as (FT option name, text) pairs, 'enabled' aside."""
        return [(n, to_text(v)) for n, v in self._set.items() if n != "enabled"]

    def validate(self):
        """Checks the explicit fields with the library (when preloaded)."""
        lib = _lib.library(required=False)
        pairs = self.settings()
        if lib is None or not pairs:
            return
        rc, msg = _options_call(lib.ft_options_check, pairs)
        if rc:
            raise ValueError("OffloadConfig: " + msg)

    @property
    def pre_inference_iters(self):
        """Upstream's static count (discovery_iters + profiling_iters); the
        manager's iters_before_inference is what the library will take."""
        return self.discovery_iters + self.profiling_iters

    def __repr__(self):
        return "OffloadConfig(%s)" % ", ".join(
            "%s=%r" % (n, getattr(self, n)) for n in FIELDS)

    def __eq__(self, other):
        return isinstance(other, OffloadConfig) and all(
            getattr(self, n) == getattr(other, n) for n in FIELDS)


def _options_call(fn, pairs):
    """fn(names, values, n, msg, len) over (name, text) pairs: (rc, msg)."""
    names = (ctypes.c_char_p * len(pairs))(*[n.encode() for n, _ in pairs])
    values = (ctypes.c_char_p * len(pairs))(*[v.encode() for _, v in pairs])
    return _lib.text_call(fn, names, values, len(pairs))


def apply(config):
    """Makes the running configuration config's explicit fields: those read
    when the program starts must already match (ValueError naming the field
    otherwise), those read at the plan are set while the library learns."""
    pairs = config.settings()
    if not pairs:
        return
    rc, msg = _options_call(_lib.library().ft_options_set, pairs)
    if rc:
        raise ValueError("offload(): the running configuration does not match the "
                         "OffloadConfig: " + msg)
