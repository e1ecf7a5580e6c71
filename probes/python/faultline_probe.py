"""faultline_probe: let faultline run, probe and bisect your own PyTorch trainer.

One file, the standard library plus torch. A few lines in a training loop give faultline what
the bundled `faultline-train` gives it: the metrics protocol (docs/metrics-protocol.md), exact
prefixes, bitwise checkpoints and resume, the always-on finiteness check and halting, full
per-module probes, fingerprints, gradient accumulation for a 1-rank replay of an N-rank run,
sample replay and replica mode. What faultline asks for arrives in FAULTLINE_* environment
variables (probes/python/README.md has the table); outside faultline the same script trains as
usual and nothing is recorded.

    import faultline_probe as fp
    run = fp.Run(config=vars(args), seed=args.seed, threads=args.threads)  # env, seeds, determinism
    model, optimizer, scheduler = ...                                         # built after Run()
    run.start(model, optimizer, scheduler)                                    # start event, resume
    for step in run.steps(args.steps):                                        # 1-based; stop-after
        batch = run.global_batch(step, n_samples, args.batch_size)            # f(seed, step) only
        with run.step(step) as s:
            for samples in s.micro_batches(batch, args.grad_accum):
                with s.data():
                    x, y = load(samples)
                s.backward(model(x, y), tokens=x.numel())
            s.all_reduce()                                 # average the gradients over the ranks
            s.clip_grad_norm(args.grad_clip)               # the check: halts (exit 3) on NaN/Inf
            optimizer.step()
            scheduler.step()
    run.end()

fp16 with a dynamic loss scaler: run.start(model, optimizer, scheduler, scaler=scaler) with
torch.amp.GradScaler; s.backward() scales the loss, s.clip_grad_norm() unscales the gradients
first, and you call scaler.step(optimizer) and scaler.update() instead of optimizer.step(). A step
whose gradients overflow is then the scaler's to skip, not a halt: its record says skipped and
the loss scale, and faultline judges a scaler that never finds a working scale.

The low-level writer of the old faultline_metrics module is here too: MetricsWriter and
fingerprint_hash. They need no torch: this module imports without it (Run then refuses).
"""

import contextlib
import ctypes
import faulthandler
import hashlib
import json
import math
import os
import pickle
import platform
import random
import shutil
import signal
import socket
import sys
import threading
import time
import warnings

try:
    import torch
except ImportError:  # the writer and the hash work without torch; Run does not
    torch = None

__all__ = ["MetricsWriter", "fingerprint_hash", "fingerprint", "PROTOCOL_VERSION", "Settings",
           "Run", "Step", "global_batch", "rank_share", "seed_everything", "make_deterministic",
           "sample_seed", "batch_seed", "DETERMINISM", "FSDP_CHECKPOINTS",
           "EXIT_OK", "EXIT_USAGE", "EXIT_NONFINITE", "EXIT_DATA", "EXIT_OOM"]

PROTOCOL_VERSION = 1
PHASES = ("forward", "backward", "optimizer", "loss", "data")
_RESERVED = ("v", "rank", "t", "type")
EXIT_OK, EXIT_USAGE, EXIT_NONFINITE, EXIT_DATA, EXIT_OOM = 0, 2, 3, 4, 5
FSDP_CHECKPOINTS = ("sharded", "whole")
CHECKPOINT_META = "faultline.pt"  # in a sharded checkpoint's folder: all but the shards
SKETCH_SIZE = 16
_M64 = (1 << 64) - 1


# ------------------------------------------------------------------------------------------------
# The protocol writer (formerly faultline_metrics.py).

def _plain(value):
    """A JSON-ready copy of `value`: NaN/Inf become strings, tensors and numpy scalars numbers."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if hasattr(value, "item"):  # torch tensors, numpy scalars and arrays
        try:
            return _plain(value.item())
        except (ValueError, RuntimeError):  # more than one element
            if hasattr(value, "tolist"):
                return _plain(value.tolist())
    return str(value)


def _tensor_bytes(tensor):
    """Yields the raw bytes of a tensor once, as a memoryview on a contiguous CPU copy (no numpy
    needed). The copy stays alive while the caller uses the view: it is a local of this frame."""
    flat = tensor.detach().reshape(-1).contiguous().cpu()
    size = flat.numel() * flat.element_size()
    if size:
        yield memoryview((ctypes.c_char * size).from_address(flat.data_ptr()))


def _chunks(data):
    """The bytes of `data`, in order: bytes-like, a torch tensor, a numpy array, or an iterable
    of those (e.g. model.parameters())."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        yield bytes(data)
    elif hasattr(data, "detach"):  # a torch tensor
        yield from _tensor_bytes(data)
    elif hasattr(data, "tobytes"):  # a numpy array
        yield data.tobytes()
    elif hasattr(data, "__iter__") and not isinstance(data, str):
        for item in data:
            yield from _chunks(item)
    else:
        raise TypeError("fingerprint needs bytes, a tensor, an array, or an iterable of them; got "
                        + type(data).__name__)


def fingerprint_hash(data):
    """16 hex digits: BLAKE2b with an 8-byte digest over the bytes of `data` (see _chunks)."""
    digest = hashlib.blake2b(digest_size=8)
    for chunk in _chunks(data):
        digest.update(chunk)
    return digest.hexdigest()


def _metrics_path(template, rank):
    """FAULTLINE_METRICS for this rank: a launcher that starts the ranks itself (torchrun) is
    given one path for all of them, with {rank} standing for RANK."""
    return template.replace("{rank}", str(rank)) if template else template


class MetricsWriter:
    """Appends protocol records to one rank's metrics file.

    path: the file; default (None) $FAULTLINE_METRICS. With neither, or with path "", the writer
    is disabled (every method does nothing), so a trainer can call it unconditionally when run
    outside faultline.
    rank: default $RANK, else 0. mode: "a" appends (the default), "w" starts the file anew.
    """

    def __init__(self, path=None, rank=None, mode="a"):
        self.rank = int(rank if rank is not None else os.environ.get("RANK", "0") or 0)
        if path is None:
            path = _metrics_path(os.environ.get("FAULTLINE_METRICS"), self.rank)
        self.path = path or None
        self._start = time.monotonic()
        if self.path:  # a job script may name a run directory that does not exist yet
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self._file = open(self.path, mode, encoding="utf-8") if self.path else None

    @property
    def enabled(self):
        return self._file is not None

    def write(self, type_, fields):
        """Writes one record of `type_` with `fields` and flushes it."""
        if self._file is None:
            return
        clash = [key for key in fields if key in _RESERVED]
        if clash:
            raise ValueError("reserved field(s) " + ", ".join(clash) + " cannot be set")
        record = {"v": PROTOCOL_VERSION, "rank": self.rank,
                  "t": round(time.monotonic() - self._start, 6), "type": type_}
        record.update(_plain(fields))
        self._file.write(json.dumps(record, allow_nan=False, separators=(",", ":")) + "\n")
        self._file.flush()

    def event(self, name, **fields):
        """An "event" record: start, checkpoint, resume, end, or a name of your own."""
        self.write("event", dict(name=name, **fields))

    def start(self, config, **fields):
        """The "start" event: `config` (a dict) plus config_hash, world_size, local_rank and host
        unless given."""
        config = dict(config)
        defaults = {
            "config": config,
            "config_hash": config_hash(config),
            "world_size": int(os.environ.get("WORLD_SIZE", "1") or 1),
            "local_rank": int(os.environ.get("LOCAL_RANK", str(self.rank)) or self.rank),
            "host": os.environ.get("FAULTLINE_HOST") or socket.gethostname(),
            # Joins the CUPTI probe's gpu records (Unix time) with this stream's `t`.
            "unix_time": round(time.time(), 6),
        }
        defaults.update(fields)
        self.event("start", **defaults)

    def step(self, step, loss, grad_norm, lr, step_ms, data_ms=0, comm_ms=0, tokens=0,
             mem_bytes=0, **extra):
        """A "step" record. Times in milliseconds, memory in bytes; extra fields as you like
        (mem_total_bytes, param_norm, update_ratio, nonfinite are understood by faultline)."""
        self.write("step", dict(step=int(step), loss=loss, grad_norm=grad_norm, lr=lr,
                                step_ms=step_ms, data_ms=data_ms, comm_ms=comm_ms,
                                tokens=int(tokens), mem_bytes=int(mem_bytes), **extra))

    def anomaly(self, step, kind, phase, where, detail, **extra):
        """An "anomaly" record. kind: "nonfinite", ...; phase: one of PHASES; where: module or
        parameter name ("blocks.2.attn"); detail: a sentence for a person."""
        self.write("anomaly", dict(step=int(step), kind=kind, phase=phase, where=where,
                                   detail=detail, **extra))

    def fingerprint(self, step, what, tensor_or_bytes, **extra):
        """A "fingerprint" record: what is "params" or "grads"; the hash is fingerprint_hash().
        Pass norm= and sketch= (see fingerprint()) as extras."""
        self.write("fingerprint", dict(step=int(step), what=what,
                                       hash=fingerprint_hash(tensor_or_bytes), **extra))

    def end(self, status="ok", **fields):
        """The "end" event."""
        self.event("end", status=status, **fields)

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def config_hash(config):
    """BLAKE2b-64 hex of the config as sorted, compact JSON."""
    canonical = json.dumps(_plain(dict(config)), sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(canonical.encode(), digest_size=8).hexdigest()


# ------------------------------------------------------------------------------------------------
# The environment contract: what faultline asks of this run.

class UsageError(Exception):
    """A bad FAULTLINE_* value or a request the script cannot satisfy: exit 2."""


def _usage_exit(message):
    sys.stderr.write("faultline_probe: error: " + message + "\n")
    sys.stderr.flush()
    raise SystemExit(EXIT_USAGE)


class Settings:
    """The FAULTLINE_* and torchrun variables, read once. An absent variable means "not asked"."""

    def __init__(self, environ=None):
        env = os.environ if environ is None else environ

        def integer(name, default, minimum=0):
            text = env.get(name, "")
            if text == "":
                return default
            try:
                value = int(text)
            except ValueError:
                raise UsageError(f"invalid {name} '{text}' (environment); expected an integer")
            if value < minimum:
                raise UsageError(f"invalid {name} '{text}' (environment); expected >= {minimum}")
            return value

        def choice(name, default, allowed):
            value = env.get(name, "") or default
            if value not in allowed:
                raise UsageError(f"invalid {name} '{value}' (environment); expected one of "
                                 + ", ".join(allowed))
            return value

        self.world_size = integer("WORLD_SIZE", 1, 1)
        self.rank = integer("RANK", 0)
        self.local_rank = integer("LOCAL_RANK", self.rank)
        if self.rank >= self.world_size:
            raise UsageError(f"RANK {self.rank} is not below WORLD_SIZE {self.world_size} "
                             "(environment); ranks are numbered 0..WORLD_SIZE-1")
        self.master_addr = env.get("MASTER_ADDR", "") or "127.0.0.1"
        self.master_port = integer("MASTER_PORT", 29500, 1)
        self.metrics = _metrics_path(env.get("FAULTLINE_METRICS", ""), self.rank) or None
        self.out = env.get("FAULTLINE_OUT", "") or os.getcwd()
        self.host = env.get("FAULTLINE_HOST", "") or socket.gethostname()
        self.stop_after = integer("FAULTLINE_STOP_AFTER", 0)
        self.resume = env.get("FAULTLINE_RESUME", "") or None
        self.checkpoint_every = integer("FAULTLINE_CHECKPOINT_EVERY", 0)
        on_halt = env.get("FAULTLINE_CHECKPOINT_ON_HALT", "").lower()
        if on_halt not in ("", "0", "1", "true", "false"):
            raise UsageError(f"invalid FAULTLINE_CHECKPOINT_ON_HALT '{on_halt}' (environment); "
                             "expected 1 or 0")
        self.checkpoint_on_halt = on_halt in ("1", "true")
        self.probe = choice("FAULTLINE_PROBE", "cheap", ("off", "cheap", "full"))
        self.probe_from = integer("FAULTLINE_PROBE_FROM", 0)
        self.fingerprint_every = integer("FAULTLINE_FINGERPRINT_EVERY", 10)
        self.accumulate = integer("FAULTLINE_ACCUMULATE", 1, 1)
        self.replay_step = integer("FAULTLINE_REPLAY_STEP", 0)
        text = env.get("FAULTLINE_REPLAY_SAMPLES", "")
        try:
            self.replay_samples = [int(x) for x in text.strip().strip("\"'").split(",")
                                   if x.strip()]
        except ValueError:
            raise UsageError(f"invalid FAULTLINE_REPLAY_SAMPLES '{text}' (environment); expected "
                             "sample indices separated by commas, e.g. 3,17")
        if self.replay_samples and not self.replay_step:
            raise UsageError("FAULTLINE_REPLAY_SAMPLES needs FAULTLINE_REPLAY_STEP (environment); "
                             "set the step to replay")
        self.replay_ranks = choice("FAULTLINE_REPLAY_RANKS", "own", ("own", "all"))

    def full_probes_at(self, step):
        return self.probe == "full" and step >= self.probe_from

    def replays(self, step):
        """Step `step` trains on FAULTLINE_REPLAY_SAMPLES only. A replay step without samples
        asks only for that step's batch event."""
        return bool(self.replay_samples) and step == self.replay_step


# ------------------------------------------------------------------------------------------------
# Sampling: the global batch of a step is a pure function of (seed, step), never of world size.

def _mix(x):
    """splitmix64's finalizer, on Python ints."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def _permute(index, epoch, seed, n_samples, bits):
    """A 4-round Feistel permutation of [0, 2**bits), cycle-walked into [0, n_samples)."""
    half = bits // 2
    mask = (1 << half) - 1
    key = _mix((seed & _M64) ^ _mix(epoch + 1))
    x = index
    while True:
        left, right = x >> half, x & mask
        for r in range(4):
            left, right = right, left ^ (_mix(right ^ key ^ (r << 56)) & mask)
        x = (left << half) | right
        if x < n_samples:
            return x


def global_batch(seed, step, n_samples, batch_size):
    """The global sample indices of `step` (1-based): positions (step-1)*B .. step*B-1 of an
    endless stream that visits every sample once per epoch, in an order fixed by (seed, epoch).
    The same definition as faultline-train's sampler (src/trainer/sampler.cpp)."""
    if n_samples < 1 or batch_size < 1 or step < 1:
        raise ValueError("global_batch needs n_samples >= 1, batch_size >= 1 and step >= 1")
    bits = max(1, (n_samples - 1).bit_length())
    bits += bits % 2  # balanced halves
    first = (step - 1) * batch_size
    return [_permute(p % n_samples, p // n_samples, seed, n_samples, bits)
            for p in range(first, first + batch_size)]


def rank_share(batch, rank, world_size):
    """This rank's contiguous slice of a global batch."""
    if len(batch) % world_size:
        raise UsageError(f"a global batch of {len(batch)} samples does not split over WORLD_SIZE "
                         f"{world_size}; choose a batch size that divides by the ranks")
    per_rank = len(batch) // world_size
    return list(batch[rank * per_rank:(rank + 1) * per_rank])


def _plan_step(run, number, batch, grad_accum):
    """This rank's samples of step `number`'s global batch, the micro-batches they split into,
    and the replayed samples (a set; None when the step is no replay). Exits 2 on a batch that
    does not split. Pure: Step.micro_batches and a data loader's batch sampler plan alike."""
    s = run.settings
    share = run.rank_share(batch)
    if s.replays(number):
        wanted = set(s.replay_samples)
        source = batch if s.replay_ranks == "all" else share
        samples = [i for i in source if i in wanted]
        if not samples:
            _usage_exit(f"none of the replayed samples is in this rank's part of step {number}'s "
                        "batch (FAULTLINE_REPLAY_SAMPLES); choose samples of that step's global "
                        "batch: " + ",".join(map(str, batch[:64])))
        return samples, [samples], wanted
    count = run.grad_accum(grad_accum)
    if len(share) % count:
        _usage_exit(f"this rank's {len(share)} samples of the batch do not split into {count} "
                    "micro-batches (grad_accum x FAULTLINE_ACCUMULATE); choose a batch size that "
                    "divides by WORLD_SIZE x micro-batches")
    rows = len(share) // count
    return share, [share[m * rows:(m + 1) * rows] for m in range(count)], None


def sample_seed(seed, step, sample):
    """The seed of the random numbers drawn while sample `sample` of step `step` loads
    (Run.sample_rng): a pure function of the run's seed, the step and the sample, so the same
    draws come in a replay of a few samples, on other ranks, in a resumed run, in any worker."""
    return _mix((seed & _M64) ^ _mix(((step & 0xFFFFFFFF) << 32) | (sample & 0xFFFFFFFF)))


def batch_seed(seed, step, samples):
    """The seed of the random numbers drawn over a whole micro-batch (a collate_fn that masks
    tokens across it, say; Step.batch_rng): a pure function of the run's seed, the step and the
    micro-batch's samples in order, so a resumed run, a replay on fewer ranks (the same
    micro-batches) and any worker draw the same. A replay of some of its samples is another
    micro-batch, and draws other numbers."""
    mixed = _mix((seed & _M64) ^ _mix((step & 0xFFFFFFFF) << 32 | 0xFFFFFFFF))
    for sample in samples:
        mixed = _mix(mixed ^ (int(sample) & _M64))
    return mixed


def _seed_host_rng(seed):
    """Seeds Python's random, torch's CPU generator and numpy's (if loaded) with `seed`. CUDA's
    generators are not touched: loading draws on the host."""
    random.seed(seed)
    torch.default_generator.manual_seed(seed)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(seed & 0xFFFFFFFF)


@contextlib.contextmanager
def _seeded_host_rng(seed):
    """The host generators seeded with `seed` inside, restored on leaving, so the caller's own
    streams (dropout, say) go on as if nothing was drawn. 50-80 us (numpy's state is most)."""
    numpy = sys.modules.get("numpy")
    saved = (random.getstate(), torch.get_rng_state(),
             numpy.random.get_state() if numpy is not None else None)
    _seed_host_rng(seed)
    try:
        yield
    finally:
        random.setstate(saved[0])
        torch.set_rng_state(saved[1])
        if saved[2] is not None:
            numpy.random.set_state(saved[2])


def _loading_rng(seed):
    """The host generators seeded with `seed` while a sample or a micro-batch loads. In a
    DataLoader worker, whose own streams feed nothing but loading, seeding is enough (~8 us more,
    not ~50-80: restoring numpy's state is most of that); in the main process they are restored
    on leaving."""
    if torch.utils.data.get_worker_info() is not None:
        _seed_host_rng(seed)
        return contextlib.nullcontext()
    return _seeded_host_rng(seed)


# ------------------------------------------------------------------------------------------------
# A torch DataLoader that loads the micro-batches the steps ask for (Run.data_loader).

class _Indexed:
    """A dataset whose items carry their index, so a loaded micro-batch says which it holds.
    Its keys are (step, sample): each sample loads under sample_seed(seed, step, sample), so
    random augmentation in `dataset[i]` draws the same numbers in any worker and any replay."""

    def __init__(self, dataset, seed):
        self.dataset, self.seed = dataset, seed

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, key):
        step, index = key
        with _loading_rng(sample_seed(self.seed, step, index)):
            return step, index, self.dataset[index]


class _IndexedCollate:
    """Your collate_fn over the items, under the micro-batch's batch_seed (random masking
    across a batch replays too); the indices beside its result."""

    def __init__(self, collate, seed):
        self.collate, self.seed = collate, seed

    def __call__(self, items):
        indices = [int(i) for _, i, _ in items]
        seed = batch_seed(self.seed, items[0][0], indices) if items else 0
        with _loading_rng(seed):
            return indices, self.collate([item for _, _, item in items])


class _StepBatches:
    """The batch sampler: this rank's micro-batches of steps first..last, in the order
    Step.micro_batches takes them (the same plan, replays included)."""

    def __init__(self, run, n_samples, batch_size, grad_accum, first, last):
        self.run, self.n_samples, self.batch_size = run, n_samples, batch_size
        self.grad_accum, self.first, self.last = grad_accum, first, last

    def __iter__(self):
        for step in range(self.first, self.last + 1):
            batch = self.run.global_batch(step, self.n_samples, self.batch_size)
            for micro in _plan_step(self.run, step, batch, self.grad_accum)[1]:
                yield [(step, i) for i in micro]


class StepLoader:
    """What Run.data_loader() returns, for s.micro_batches(loader=...): `loader` is the torch
    DataLoader, read through one iterator from the run's first step on."""

    def __init__(self, loader, n_samples, batch_size, grad_accum):
        self.loader, self.n_samples = loader, n_samples
        self.batch_size, self.grad_accum = batch_size, grad_accum
        self._iterator = None

    def next(self):
        """(sample indices, loaded micro-batch) of the next micro-batch."""
        if self._iterator is None:  # its workers start here, after a resume's RNG restore
            self._iterator = iter(self.loader)
        try:
            return next(self._iterator)
        except StopIteration:
            raise RuntimeError("the data loader has no micro-batch left: make it with the same "
                               "total as run.steps(total)") from None


# ------------------------------------------------------------------------------------------------
# Determinism.

def seed_everything(seed):
    """Seeds Python's random, torch (CPU and every CUDA device) and numpy if it is loaded."""
    random.seed(seed)
    if torch is not None:
        torch.manual_seed(seed)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(seed % (1 << 32))


# How hard Run asks torch for deterministic kernels (Run(determinism=...)):
# "strict": an op with no deterministic kernel raises (the step then exits 2, naming it); flash
#   and memory-efficient attention run their deterministic backward.
# "warn": such an op warns and runs as it is; so does attention's backward. Replays may differ.
DETERMINISM = ("strict", "warn")


def make_deterministic(threads=None, cuda=False, determinism="strict"):
    """Asks torch for deterministic kernels and a fixed thread count. Returns the facts for the
    start event: "deterministic" (the flags in effect) and "nondeterministic" (what failed)."""
    if determinism not in DETERMINISM:
        raise ValueError(f"determinism={determinism!r}: it is one of " + ", ".join(DETERMINISM))
    failed = []
    if cuda:
        # cuBLAS reads it when its first handle is made; ":4096:8" and ":16:8" are deterministic.
        workspace = os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        if workspace not in (":4096:8", ":16:8"):
            failed.append(f"CUBLAS_WORKSPACE_CONFIG={workspace} (cuBLAS may reduce in any order)")
    warn_only = determinism == "warn"
    try:
        if warn_only:
            torch.use_deterministic_algorithms(True, warn_only=True)
            failed.append("determinism=\"warn\": an op with no deterministic kernel (and, on CUDA, "
                          "attention's backward) runs nondeterministically, with a warning")
        else:
            torch.use_deterministic_algorithms(True)
    except Exception as error:  # noqa: BLE001 - recorded, not fatal
        failed.append(f"torch.use_deterministic_algorithms: {error}")
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    if threads:
        torch.set_num_threads(int(threads))
    # Only possible before any parallel work has started, and only once: torch 1.13 aborts the
    # process (no exception) when it is set again, as a second Run in one process would.
    if torch.get_num_interop_threads() != 1:
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:
            pass
    if threads and torch.get_num_threads() != int(threads):
        failed.append(f"torch.set_num_threads({threads}) left {torch.get_num_threads()} threads")
    flags = {
        "use_deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "warn_only": warn_only,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
    }
    if cuda:
        flags["cublas_workspace_config"] = os.environ.get("CUBLAS_WORKSPACE_CONFIG", "")
        flags["matmul_allow_tf32"] = torch.backends.cuda.matmul.allow_tf32
        flags["cudnn_allow_tf32"] = torch.backends.cudnn.allow_tf32
    return {"deterministic": flags, "nondeterministic": failed}


def _rng_state():
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    if "numpy" in sys.modules:
        # Its key array as a list: a checkpoint of lists, tensors and numbers loads with
        # torch.load's default (weights_only) since torch 2.6, an ndarray does not.
        kind, keys, *rest = sys.modules["numpy"].random.get_state()
        state["numpy"] = (kind, keys.tolist(), *rest)
    return state


def _set_rng_state(state):
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "numpy" in state and "numpy" in sys.modules:
        numpy = sys.modules["numpy"]
        kind, keys, *rest = state["numpy"]
        numpy.random.set_state((kind, numpy.asarray(keys, dtype=numpy.uint32), *rest))


# ------------------------------------------------------------------------------------------------
# Fingerprints: hash, norm and a 16-number sketch (docs/metrics-protocol.md, docs/ranks.md).

# Elements per piece a fingerprint reads at a time: its scratch buffers (four of 8 MiB) are
# made once per fingerprint and reused, as a fresh mapping per op costs more than the op here.
_FINGERPRINT_PIECE = 1 << 20

# Elements per allreduce of the helper's own gradient averaging (64 MiB in float32), as DDP's
# buckets: the copy it averages in is this large, not the size of every gradient together.
_ALLREDUCE_BUCKET = 1 << 24


def _signed64(c):
    return c - (1 << 64) if c >= 1 << 63 else c


_SPLITMIX = [_signed64(c) for c in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB)]


def _sign_bits(start, x, t):
    """x[i] = the low bit of splitmix64(start + i) (src/trainer/fingerprint.cpp), in place in the
    int64 buffers x and t (scratch) of one length: wrapping int64 arithmetic has the low 64 bits
    of the uint64 one, and only bits 0..31 of the last product reach the result."""
    torch.arange(start, start + x.numel(), out=x)
    x += _SPLITMIX[0]
    torch.bitwise_right_shift(x, 30, out=t)
    t &= (1 << 34) - 1  # logical shift: these bits reach the result through the next product
    x ^= t
    x *= _SPLITMIX[1]
    torch.bitwise_right_shift(x, 27, out=t)  # arithmetic will do: bits 0..31 of w = y ^ y>>27
    x ^= t
    x *= _SPLITMIX[2]
    torch.bitwise_right_shift(x, 31, out=t)
    x ^= t
    x &= 1
    return x


def fingerprint(tensors, gather=None):
    """{"hash", "norm", "sketch"} of the tensors flattened in order into one buffer (of their
    dtype if they share one, else float32). hash: BLAKE2b-64 of the buffer's raw bytes; norm: its
    L2 norm; sketch: for each of 16 contiguous chunks, sum of s_i * x_i in float64, s_i = +-1 from
    splitmix64(i).

    The buffer is never made: tensors are read in pieces, so a fingerprint takes a few MiB
    whatever the model's size. `gather` makes a tensor whole first (FSDP2's full_tensor(), a
    collective), one at a time, so a model sharded because it does not fit on one device is
    never whole on one for it."""
    if hasattr(tensors, "detach"):
        tensors = [tensors]
    tensors = [t.detach() for t in tensors]
    n = sum(t.numel() for t in tensors)
    same_dtype = len({t.dtype for t in tensors}) <= 1
    chunk = max(1, -(-n // SKETCH_SIZE))
    digest = hashlib.blake2b(digest_size=8)
    device = tensors[0].device if tensors else torch.device("cpu")
    size = min(_FINGERPRINT_PIECE, max([t.numel() for t in tensors] + [1]))
    bits, scratch = (torch.empty(size, dtype=torch.int64, device=device) for _ in range(2))
    values, signed = (torch.empty(size, dtype=torch.float64, device=device) for _ in range(2))
    squares = torch.zeros((), dtype=torch.float64, device=device)
    sketch = torch.zeros(SKETCH_SIZE, dtype=torch.float64, device=device)
    offset = 0
    for tensor in tensors:
        whole = (gather(tensor) if gather is not None else tensor).reshape(-1)
        whole = whole if same_dtype else whole.float()
        for start in range(0, whole.numel(), size):
            piece = whole[start:start + size]
            for data in _tensor_bytes(piece):
                digest.update(data)
            count = piece.numel()
            x = values[:count].copy_(piece)
            squares += torch.dot(x, x)
            s = signed[:count].copy_(_sign_bits(offset, bits[:count], scratch[:count]))
            s.mul_(2).sub_(1).mul_(x)
            first = 0
            while first < count:  # the part of each sketch chunk this piece holds
                index = (offset + first) // chunk
                last = min(count, (index + 1) * chunk - offset)
                sketch[index] += s[first:last].sum()
                first = last
            offset += count
    numbers = [squares.sqrt().item()] + sketch.tolist()
    return {"hash": digest.hexdigest(), "norm": numbers[0], "sketch": numbers[1:]}


# ------------------------------------------------------------------------------------------------
# Small facts about the process.

def _resident_bytes():
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _physical_memory():
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _adopted_group(settings):
    """Whether the script made the default process group itself (dist.init_process_group before
    Run, as most do): the helper then uses it, after checking that it is the one the environment
    describes, and leaves its end to the script."""
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        return False
    mine = (dist.get_rank(), dist.get_world_size())
    if mine != (settings.rank, settings.world_size):
        _usage_exit(f"the script's process group is rank {mine[0]} of {mine[1]}, but RANK and "
                    f"WORLD_SIZE say {settings.rank} of {settings.world_size}: initialize it from "
                    "the environment (init_method='env://') or let faultline_probe.Run do it")
    return True


def _default_sigterm():
    """SIGTERM's default action again, from any thread (signal.signal works in the main one
    only)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.signal.restype = ctypes.c_void_p
    libc.signal.argtypes = (ctypes.c_int, ctypes.c_void_p)
    libc.signal(int(signal.SIGTERM), None)  # SIG_DFL is 0


def _is_oom(error):
    if isinstance(error, MemoryError):
        return True
    oom_type = getattr(torch.cuda, "OutOfMemoryError", None) if torch is not None else None
    if oom_type is not None and isinstance(error, oom_type):
        return True
    text = str(error)
    return isinstance(error, RuntimeError) and ("out of memory" in text
                                                or "can't allocate memory" in text)


def _nondeterministic_op(error):
    """The op that raised because it has no deterministic kernel under
    torch.use_deterministic_algorithms(True), else None."""
    marker = " does not have a deterministic implementation"
    text = str(error)
    if not isinstance(error, RuntimeError) or marker not in text:
        return None
    words = text[:text.index(marker)].split()
    return words[-1] if words else "an op"


def _reduce_dtype(grads):
    """float64 if any gradient is, else float32: the dtype the ranks average in."""
    return torch.float64 if any(g.dtype == torch.float64 for g in grads) else torch.float32


def _unwrapped(model):
    """(the module the script built, the DistributedDataParallel around it or None, whether
    torch.compile wrapped it), through DDP and torch.compile's OptimizedModule in either order
    (nanoGPT compiles, then wraps in DDP)."""
    parallel = getattr(getattr(torch.nn, "parallel", None), "DistributedDataParallel", None)
    module, ddp, compiled = model, None, False
    while True:
        if parallel is not None and isinstance(module, parallel):
            ddp, module = ddp or module, module.module
        elif isinstance(getattr(module, "_orig_mod", None), torch.nn.Module):
            compiled, module = True, module._orig_mod
        else:
            return module, ddp, compiled


def _classes(value):
    return {c.__name__ for c in type(value).__mro__}


def _is_fsdp2(module, world_size):
    """Whether FSDP2 shards the model (fully_shard: every parameter a DTensor sharded over one
    mesh of all the ranks); False for a model each rank holds whole (DDP, ZeRO-1, one rank).
    Raises a UsageError naming a part the helper cannot handle (FSDP1's flat parameters, tensor
    parallelism, HSDP's 2-D mesh, a part left unsharded).
    By class name: importing torch.distributed.fsdp fails on some torch/Python pairs."""
    fsdp2 = False
    for name, part in module.named_modules():
        if "FullyShardedDataParallel" in _classes(part):
            raise UsageError(f"FSDP's FullyShardedDataParallel at '{name or 'the model'}': the "
                             "helper supports FSDP2 (torch.distributed.fsdp.fully_shard)")
        fsdp2 = fsdp2 or "FSDPModule" in _classes(part)
    for name, parameter in module.named_parameters():
        dtensor = "DTensor" in _classes(parameter) | _classes(parameter.data)
        if not dtensor:
            if fsdp2:
                raise UsageError(f"parameter '{name}' is not sharded while others are "
                                 "(fully_shard): call fully_shard on the root module too")
            continue
        if not fsdp2:
            raise UsageError(f"a DTensor parameter '{name}' outside fully_shard (tensor "
                             "parallelism)")
        mesh, placements = parameter.device_mesh, tuple(parameter.placements)
        if mesh.ndim != 1 or mesh.size() != world_size or \
                any("Shard" not in _classes(p) for p in placements):
            raise UsageError(
                f"parameter '{name}' is laid out as {placements} on a mesh of shape "
                f"{tuple(mesh.shape)}: the helper supports FSDP2 sharding over all "
                f"{world_size} ranks on one mesh dimension, not HSDP or tensor parallelism")
    return fsdp2


def _local(tensor):
    """This rank's piece of a DTensor (its FSDP2 shard; the value of a replicated one), or the
    tensor itself."""
    to_local = getattr(tensor, "to_local", None)
    return to_local() if to_local is not None else tensor


def _whole(tensor):
    """The whole of a DTensor, gathered from every rank (a collective), or the tensor itself."""
    full_tensor = getattr(tensor, "full_tensor", None)
    return full_tensor() if full_tensor is not None else tensor


def _plain_name(name):
    """A module's or parameter's name without torch.compile's "_orig_mod" parts: the name the
    script's model has (a submodule compiled on its own is named so inside its parent too)."""
    return ".".join(part for part in name.split(".") if part != "_orig_mod")


def _eager_stance():
    """A context in which torch.compile's code is skipped and every module runs eagerly, so the
    full probes' hooks on the modules inside a compiled model see their outputs (Dynamo ignores
    hooks added after it compiled). None where torch has no torch.compiler.set_stance (< 2.6)."""
    set_stance = _set_stance()
    return set_stance("force_eager") if set_stance is not None else None


def _set_stance():
    return getattr(getattr(torch, "compiler", None), "set_stance", None)


def _global_norm(tensors):
    """The L2 norm of all the tensors together, as a float (one host sync)."""
    if not tensors:
        return 0.0
    with torch.no_grad():
        norms = torch._foreach_norm(tensors) if hasattr(torch, "_foreach_norm") else \
            [t.norm() for t in tensors]
        return float(torch.stack(norms).norm())


def _floating_tensors(value):
    """The floating-point tensors in a module's output: a tensor, or tuples/lists/dicts of them."""
    if torch.is_tensor(value):
        if value.is_floating_point() or value.is_complex():
            yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _floating_tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _floating_tensors(item)


# ------------------------------------------------------------------------------------------------
# The run and its steps.

class Run:
    """One rank's training run as faultline sees it.

    Make it first (it seeds, so the model must be built after it), then call start() with the
    model and optimizer, iterate steps(), wrap each step in step(), and call end().

    config: your settings (a dict; it goes into the start event and the config_hash).
    seed: seeds random, torch and numpy; also the seed of global_batch(). Default config["seed"].
    threads: torch intra-op threads (recorded; the loss bits depend on it). Default: torch's.
    device: default cuda:LOCAL_RANK when CUDA is available, else cpu.
    backend: the process group's for WORLD_SIZE > 1; default nccl on CUDA, else gloo.
    determinism: "strict" (default) or "warn", see DETERMINISM: for a model with an op that has
        no deterministic kernel, at the price of replays that may differ.
    fsdp_checkpoint: how a model sharded by FSDP2 is checkpointed: "sharded" (default), a folder
        of torch.distributed.checkpoint's shards, each rank writing its own; or "whole", one
        file of the whole state gathered onto rank 0's CPU (it must fit there).
    """

    def __init__(self, config=None, *, seed=None, threads=None, device=None, backend=None,
                 timeout_s=300, environ=None, determinism="strict", fsdp_checkpoint="sharded"):
        if torch is None:
            raise RuntimeError("faultline_probe.Run needs torch")
        if fsdp_checkpoint not in FSDP_CHECKPOINTS:
            raise ValueError(f"fp.Run(fsdp_checkpoint={fsdp_checkpoint!r}): expected one of "
                             + ", ".join(FSDP_CHECKPOINTS))
        self.fsdp_checkpoint = fsdp_checkpoint
        faulthandler.enable()  # a crash prints the Python stacks
        if hasattr(signal, "SIGUSR1"):  # faultline sends SIGUSR1 to a hung rank before the kill
            # To stderr, or to FAULTLINE_STACKS ({rank}: RANK) when the ranks share one output
            # (a launcher that starts them itself).
            stacks = _metrics_path(os.environ.get("FAULTLINE_STACKS", ""),
                                   os.environ.get("RANK", "0"))
            if stacks:  # a job's FAULTLINE_STACKS may name a folder it has not made yet
                os.makedirs(os.path.dirname(os.path.abspath(stacks)), exist_ok=True)
            self._stacks_file = open(stacks, "w") if stacks else sys.stderr
            faulthandler.register(signal.SIGUSR1, file=self._stacks_file, all_threads=True)
        try:
            self.settings = Settings(environ)
        except UsageError as error:
            _usage_exit(str(error))
        s = self.settings
        self.config = dict(config or {})
        self.rank, self.world_size, self.local_rank = s.rank, s.world_size, s.local_rank
        self.seed = int(seed if seed is not None else self.config.get("seed", 0))
        if device is None:
            device = f"cuda:{s.local_rank}" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        self.facts = make_deterministic(threads, cuda=self.device.type == "cuda",
                                        determinism=determinism)
        seed_everything(self.seed)
        self.metrics = MetricsWriter(s.metrics or "", s.rank, mode="a" if s.resume else "w")
        self.backend = "none"
        self._owns_group = False  # the helper made the process group (and ends it)
        if s.world_size > 1 and _adopted_group(s):
            import torch.distributed as dist
            self.backend = str(dist.get_backend())
        elif s.world_size > 1:
            import datetime
            import torch.distributed as dist
            self._owns_group = True
            self.backend = backend or ("nccl" if self.device.type == "cuda" else "gloo")
            if environ is None:  # env:// also finds torchrun's agent store
                os.environ.setdefault("MASTER_ADDR", s.master_addr)
                os.environ.setdefault("MASTER_PORT", str(s.master_port))
                init = "env://"
            else:
                init = f"tcp://{s.master_addr}:{s.master_port}"
            def init_group():
                dist.init_process_group(self.backend, init_method=init, rank=s.rank,
                                        world_size=s.world_size,
                                        timeout=datetime.timedelta(seconds=timeout_s))
            try:
                init_group()
            except RuntimeError as error:  # torch.distributed.DistStoreError is one
                # A torch built without libuv (Debian's) refuses its own default TCPStore
                # backend since 2.4; every rank fails alike and retries with the other one.
                if "without libuv" not in str(error):
                    raise
                os.environ["USE_LIBUV"] = "0"
                init_group()
        self.model = self.optimizer = self.scheduler = self.scaler = None
        self.module = None        # the model inside DDP and torch.compile, else the model
        self.ddp = False          # a DistributedDataParallel model (self._ddp)
        self.fsdp = False         # parameters sharded by FSDP2's fully_shard (DTensors)
        self.compiled = False     # torch.compile wraps the model
        self.skipped_steps = 0    # steps the loss scaler skipped (gradients overflowed)
        self.first_step = None
        self.last_step = None
        self.collectives = 0
        self._named = []          # (name, parameter) in named_parameters() order
        self._probes_attached = False
        self._probing = None      # the Step whose full probes are on, else None
        self._ended = False
        self._end_lock = threading.Lock()
        self._sigterm_received = False
        self._last_run = None     # the last step this process ran
        # An exception that ends the script still ends its metrics: an end event with status
        # "error" and the exception, so a reader of the file (faultline import) can tell it from
        # a process that was killed. The previous hook still prints the traceback.
        previous_hook = sys.excepthook

        def end_on_uncaught(kind, value, tb):
            # After a SIGTERM the error is its aftermath (a DataLoader worker killed with the
            # script), raised before the watcher thread got the GIL: the end names the signal,
            # and the process dies of it as it would have without the helper.
            terminated = self._sigterm_received and os.getpid() == self._pid
            if not issubclass(kind, KeyboardInterrupt):
                status = {"status": "terminated", "signal": "SIGTERM"} if terminated else {
                    "status": "error"}
                try:
                    self.end(**status, error=f"{kind.__name__}: {value}"[:500])
                except Exception:  # the metrics file itself may be what failed
                    pass
            previous_hook(kind, value, tb)
            if terminated:
                sys.stderr.flush()
                _default_sigterm()
                os.kill(os.getpid(), signal.SIGTERM)

        sys.excepthook = end_on_uncaught
        # A job's scheduler ends it with SIGTERM (its time limit, a cancel; torchrun and srun
        # pass it on): the end event says so, so a reader of the file tells it from a crash. A
        # handler of the script's own is left alone; so is a script that makes Run off the main
        # thread (Python allows handlers only there).
        self._pid = os.getpid()
        self._watch_sigterm()
        self._first_loss = self._last_loss = math.nan
        self._steps_run = 0
        self._timed_tokens = 0
        self._timed_ms = 0.0

    def _watch_sigterm(self):
        """A Python signal handler runs only when the main thread is back in Python, and a rank
        blocked in a collective never is: SIGTERM must still end it at once. So Python's C-level
        handler only writes the signal to a pipe (set_wakeup_fd), and a thread that reads it
        writes the end event and dies of SIGTERM as the process would have."""
        if (not hasattr(signal, "SIGTERM") or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL
                or threading.current_thread() is not threading.main_thread()):
            return
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        if signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False) != -1:
            signal.set_wakeup_fd(-1)  # the script's own wake-up fd (asyncio's): left to it
            os.close(read_fd)
            os.close(write_fd)
            return
        def received(signum, frame):
            # Runs on the main thread once it is back in Python, which may be before the
            # watcher thread reads the pipe.
            self._sigterm_received = True

        signal.signal(signal.SIGTERM, received)
        # A forked child (a DataLoader worker) shares the pipe: its SIGTERM must not end us.
        os.register_at_fork(after_in_child=_default_sigterm)

        def watch():
            while True:
                data = os.read(read_fd, 64)
                if not data:
                    return
                if signal.SIGTERM in data:
                    self._sigterm_received = True
                    if os.getpid() == self._pid:  # end() waits for one being written
                        try:
                            self.end("terminated", signal="SIGTERM")
                        except Exception:  # noqa: BLE001 - dying anyway
                            pass
                    _default_sigterm()
                    os.kill(os.getpid(), signal.SIGTERM)
                    return

        threading.Thread(target=watch, name="faultline-sigterm", daemon=True).start()

    # -- setting up ----------------------------------------------------------------------------

    def start(self, model, optimizer, scheduler=None, scaler=None, state=None, **fields):
        """Writes the start event and, with FAULTLINE_RESUME, loads the checkpoint (model,
        optimizer, scheduler, loss scaler, `state`, step and every RNG state) and writes the
        resume event. scaler: fp16's dynamic loss scaler (torch.amp.GradScaler, or any object
        with its scale, unscale_, get_scale, state_dict and load_state_dict); an overflowing step
        is then skipped, not halted on. state: {name: object with state_dict() and
        load_state_dict()}, the rest of what the steps depend on (an EMA or teacher model, a
        second optimizer, a curriculum), saved in every checkpoint from rank 0 and loaded on
        resume: a replay from a checkpoint is bitwise only when it holds all of it. Extra fields
        (e.g. samples=len(dataset)) go into the start event. Returns the first step."""
        self.state = dict(state or {})
        for name, value in self.state.items():
            if not (callable(getattr(value, "state_dict", None))
                    and callable(getattr(value, "load_state_dict", None))):
                raise TypeError(f"run.start(state=...): '{name}' is a {type(value).__name__}, "
                                "which has no state_dict() and load_state_dict()")
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        # DistributedDataParallel averages the gradients in the backward pass: the steps then
        # skip the helper's own allreduce of them, and checkpoints and probes use the module
        # inside DDP and torch.compile, so a one-rank replay (no DDP) or a run without compile
        # loads them and names the same modules.
        self.module, self._ddp, self.compiled = _unwrapped(model)
        try:  # FSDP2 reduce-scatters the gradients: no allreduce of the helper's either
            self.fsdp = _is_fsdp2(self.module, self.world_size)
        except UsageError as error:
            _usage_exit(f"the model's parameters are sharded across ranks: {error}")
        self.ddp = self._ddp is not None
        # DDP also broadcasts the module's buffers before the first forward pass of a step.
        self._ddp_broadcasts = self.ddp and bool(getattr(self._ddp, "broadcast_buffers", False)) \
            and any(True for _ in self.module.buffers())
        if self.compiled and _set_stance() is None:
            print(f"faultline_probe: torch {torch.__version__} has no torch.compiler.set_stance: "
                  "full probes name only modules outside the compiled model", file=sys.stderr)
        enabled = getattr(scaler, "is_enabled", lambda: scaler is not None)
        self.scaler = scaler if enabled() else None  # a disabled GradScaler scales nothing
        if self.fsdp and self.scaler is not None:
            _usage_exit("the model's parameters are sharded across ranks: fp16's loss scaler "
                        "under FSDP2: its overflow check sees this rank's shards only, so the "
                        "ranks could disagree on a skip; bf16 needs no scaler")
        self._named = [(_plain_name(n), p) for n, p in self.module.named_parameters()
                       if p.requires_grad]
        self.first_step = 1
        meta = None
        if self.settings.resume:
            meta = self._load(self.settings.resume)
            self.first_step = meta["step"] + 1
        start = {
            "config": self.config, "config_hash": config_hash(self.config),
            "world_size": self.world_size, "local_rank": self.local_rank,
            "host": self.settings.host, "backend": self.backend,
            "parameters": sum(p.numel() for _, p in self._named),
            "first_step": self.first_step, "seed": self.seed,
            "threads": torch.get_num_threads(), "interop_threads": torch.get_num_interop_threads(),
            "torch_version": torch.__version__, "python_version": platform.python_version(),
            "device": str(self.device), "cpu": _cpu_model(), "mem_total_bytes": _physical_memory(),
            "probe": self.settings.probe, "trainer": "python", "helper": "faultline_probe",
            "ddp": self.ddp, "fsdp": self.fsdp, "compiled": self.compiled,
            "loss_scaler": type(self.scaler).__name__ if self.scaler is not None else "",
            "state": sorted(self.state),
            "command": sys.argv, "pid": os.getpid(),
        }
        if self.device.type == "cuda":
            start["cuda_device"] = torch.cuda.get_device_name(self.device)
            start["cuda_version"] = torch.version.cuda
        start.update(self.facts)
        start.update(fields)
        self.metrics.event("start", **start)
        if meta is not None:
            self.metrics.event("resume", step=meta["step"], path=self.settings.resume,
                               checkpoint_config_hash=meta.get("config_hash", ""))
        return self.first_step

    def steps(self, total):
        """The step numbers to run: first_step .. total, or .. FAULTLINE_STOP_AFTER if smaller.
        `total` is the run's length (your schedule's horizon); a stop-after run is its prefix."""
        if self.first_step is None:
            raise RuntimeError("call run.start(model, optimizer) before run.steps()")
        self.last_step = self._last_of(total)
        return iter(range(self.first_step, self.last_step + 1))

    def _last_of(self, total):
        """The last step a run of `total` steps runs here: FAULTLINE_STOP_AFTER's when smaller."""
        stop = self.settings.stop_after
        return min(total, stop) if stop > 0 else total

    # -- data ---------------------------------------------------------------------------------

    def global_batch(self, step, n_samples, batch_size):
        """The global batch of `step`: sample indices, a pure function of (seed, step)."""
        return global_batch(self.seed, step, n_samples, batch_size)

    def rank_share(self, batch):
        """This rank's contiguous slice of a global batch."""
        try:
            return rank_share(batch, self.rank, self.world_size)
        except UsageError as error:
            _usage_exit(str(error))

    def grad_accum(self, base=1):
        """Micro-batches per rank and step: yours times FAULTLINE_ACCUMULATE."""
        return int(base) * self.settings.accumulate

    def data_loader(self, dataset, batch_size, total, grad_accum=1, **options):
        """A torch DataLoader over `dataset` (samples 0..len(dataset)-1) that loads this rank's
        micro-batches of the steps run.steps(total) runs, in order, for
        s.micro_batches(loader=...): global_batch(step, len(dataset), batch_size) split as
        micro_batches(batch, grad_accum) splits it, replays included. `options` are
        DataLoader's own (num_workers, collate_fn, pin_memory, prefetch_factor, ...): its
        workers load ahead while a step computes. Call it after start(): a resumed run loads
        from its first step. Making it draws nothing from torch's global RNG (its workers' seeds
        come from a generator seeded with the run's seed), so the model's random numbers are
        those of a run without it. Each `dataset[i]` runs under sample_rng(step, i): random
        augmentation drawn from random, torch or numpy there is replayed bit for bit."""
        if self.first_step is None:
            raise RuntimeError("call run.start(model, optimizer) before run.data_loader()")
        chosen = sorted({"shuffle", "sampler", "batch_sampler", "drop_last"} & set(options))
        if chosen:
            raise TypeError(f"run.data_loader() chooses {', '.join(chosen)} itself: a step's "
                            "global batch is global_batch(step, len(dataset), batch_size)")
        from torch.utils.data import DataLoader
        from torch.utils.data.dataloader import default_collate
        n_samples = len(dataset)
        collate = options.pop("collate_fn", None) or default_collate
        generator = options.pop("generator", None) or torch.Generator().manual_seed(self.seed)
        loader = DataLoader(_Indexed(dataset, self.seed),
                            collate_fn=_IndexedCollate(collate, self.seed),
                            generator=generator,
                            batch_sampler=_StepBatches(self, n_samples, batch_size, grad_accum,
                                                       self.first_step, self._last_of(total)),
                            **options)
        return StepLoader(loader, n_samples, batch_size, grad_accum)

    def sample_rng(self, step, sample):
        """A context in which random, torch's CPU generator and numpy draw the numbers of
        sample `sample` of step `step` (sample_seed): load and augment a sample inside it and a
        replay of that sample, a resumed run or another rank draws the same. Your own streams
        are restored on leaving. run.data_loader() loads every sample in one."""
        return _seeded_host_rng(sample_seed(self.seed, int(step), int(sample)))

    # -- stepping -----------------------------------------------------------------------------

    def step(self, number):
        """The context of one training step; see Step."""
        if self.model is None:
            raise RuntimeError("call run.start(model, optimizer) before run.step()")
        return Step(self, number)

    def end(self, status="ok", **fields):
        """Writes the end event (once) and shuts the process group down. Extra fields (e.g.
        error=...) go into the end event."""
        # The SIGTERM watcher and an uncaught exception may both end the run, each then killing
        # the process: the lock is held until the event is written, so neither kills it midway.
        with self._end_lock:
            if self._ended:
                return
            self._ended = True
            last = self._last_run if self._last_run is not None else (self.first_step or 1) - 1
            if self.scaler is not None:
                fields.setdefault("skipped_steps", self.skipped_steps)
            self.metrics.end(status=status, step=last, **fields,
                             tokens_per_s=(self._timed_tokens / (self._timed_ms / 1000)
                                           if self._timed_ms > 0 else 0.0),
                             first_loss=self._first_loss, last_loss=self._last_loss)
            self.metrics.close()
        if status in ("ok", "nonfinite"):  # every rank ends here at the same step
            self._drain_collectives()
        if status == "ok" and self._owns_group:
            import torch.distributed as dist
            if dist.is_initialized():
                dist.destroy_process_group()

    def _drain_collectives(self):
        """Gloo's worker threads let go of a finished collective a moment after its caller saw
        it finish; a tensor the script has dropped meanwhile is then freed on that thread, which
        takes the GIL, and at interpreter exit that aborts the process ("terminate called
        without an active exception", no Python frame). A barrier first waits for every
        collective queued or running before it, so none is left to free at exit. Bounded: a
        peer that never comes (it ended otherwise) costs 10 s, not a hang."""
        import torch.distributed as dist
        if self.world_size < 2 or not dist.is_initialized() or dist.get_backend() != "gloo":
            return
        import datetime
        try:
            dist.barrier(async_op=True).wait(timeout=datetime.timedelta(seconds=10))
        except RuntimeError:  # a peer gone or late: nothing more to wait for
            pass

    # -- checkpoints --------------------------------------------------------------------------

    def checkpoint_path(self, step):
        """A file, or the folder of a sharded checkpoint (FSDP2, fsdp_checkpoint="sharded")."""
        name = f"ckpt-step{step:06d}" + ("" if self._sharded_checkpoints() else ".pt")
        return os.path.abspath(os.path.join(self.settings.out, name))

    def _sharded_checkpoints(self):
        return self.fsdp and self.fsdp_checkpoint == "sharded"

    def save_checkpoint(self, step, rng=None):
        """Saves the state after `step` (rank 0 writes the file and the checkpoint event; every
        rank takes part, since every rank's RNG state goes in). Returns the path."""
        rng = rng if rng is not None else _rng_state()
        states = [rng]
        if self.world_size > 1:
            import torch.distributed as dist
            states = [None] * self.world_size
            self._collective("all_gather", step)
            dist.all_gather_object(states, rng)
            # A sharded optimizer (ZeRO-1: torch's ZeroRedundancyOptimizer) holds each rank's
            # share of the state: every rank sends its share to rank 0, which saves the whole.
            if hasattr(self.optimizer, "consolidate_state_dict"):
                self._collective("consolidate_state_dict", step)
                self.optimizer.consolidate_state_dict(to=0)
        # Format 1 holds the optimizer's own state_dict (keyed by index); 2, FSDP2's whole state
        # keyed by parameter name (torch.distributed.checkpoint's full state dict); 3 is a
        # folder of torch.distributed.checkpoint's shards, the rest in CHECKPOINT_META.
        path = self.checkpoint_path(step)
        temporary = path + ".tmp"
        sharded = self._sharded_checkpoints()
        whole = self._whole_state(step) if self.fsdp and not sharded else None
        if sharded:
            self._save_shards(step, temporary)
        if self.rank != 0:
            return path
        os.makedirs(os.path.dirname(path), exist_ok=True)
        state = {"format": "faultline_probe checkpoint",
                 "version": 3 if sharded else 2 if whole is not None else 1, "step": step,
                 "config": self.config, "config_hash": config_hash(self.config),
                 "world_size": self.world_size, "seed": self.seed,
                 "torch_version": str(torch.__version__),  # not a TorchVersion: see _rng_state
                 "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
                 "scaler": self.scaler.state_dict() if self.scaler is not None else None,
                 "state": {name: value.state_dict() for name, value in self.state.items()},
                 "rng": states}
        if not sharded:
            state["model"] = whole[0] if whole is not None else self.module.state_dict()
            state["optimizer"] = whole[1] if whole is not None else self.optimizer.state_dict()
        torch.save(state, os.path.join(temporary, CHECKPOINT_META) if sharded else temporary)
        if sharded and os.path.isdir(path):  # a run that saves the same step again
            shutil.rmtree(path)
        os.replace(temporary, path)  # never a half-written checkpoint under the real name
        self.metrics.event("checkpoint", step=step, path=path)
        return path

    def _save_shards(self, step, folder):
        """FSDP2: every rank writes its shards of the model's and the optimizer's state into
        `folder` (torch.distributed.checkpoint; rank 0 writes its metadata last, once every rank
        has written), so no rank holds more than its own share."""
        import torch.distributed as dist
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict
        if self.rank == 0:  # what a run killed while saving left
            shutil.rmtree(folder, ignore_errors=True)
        if self.world_size > 1:
            self._collective("barrier", step)
            dist.barrier()
        model_state, optimizer_state = get_state_dict(self.module, self.optimizer)
        self._collective("all_gather", step)
        dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=folder)

    def _load(self, path):
        try:
            # The run's own checkpoint, written by this helper: torch 2.6's default
            # (weights_only=True) would refuse what the objects given as state= saved, when that
            # is more than tensors, numbers and containers of them.
            folder = os.path.isdir(path)
            state = torch.load(os.path.join(path, CHECKPOINT_META) if folder else path,
                               map_location="cpu", weights_only=False)
            if not isinstance(state, dict) or state.get("format") != "faultline_probe checkpoint":
                raise ValueError("not a faultline_probe checkpoint")
            version = state.get("version")
            if version not in (1, 2, 3):
                raise ValueError(f"its format version is {version}; this helper reads 1, 2 and "
                                 "3 (a newer helper wrote it?)")
            if (version == 3) != folder:
                raise ValueError(f"format {version} is " + ("a folder" if version == 3 else
                                                            "one file"))
            if version == 3:
                self._load_shards(path)
            elif version == 2:
                self._load_whole_state(state["model"], state["optimizer"])
            elif self.fsdp:
                raise ValueError("it holds the optimizer's state by parameter index (format "
                                 "1, a run without FSDP), which a model sharded by fully_shard "
                                 "cannot load; resume it without fully_shard")
            else:
                self.module.load_state_dict(state["model"])
                self.optimizer.load_state_dict(state["optimizer"])
            if self.scheduler is not None and state.get("scheduler") is not None:
                self.scheduler.load_state_dict(state["scheduler"])
            # The scale decides which steps overflow: a replay needs the one the run had.
            if self.scaler is not None and state.get("scaler") is not None:
                self.scaler.load_state_dict(state["scaler"])
            self._load_state(state.get("state") or {})
        except (OSError, ValueError, KeyError, RuntimeError, EOFError,
                pickle.UnpicklingError) as error:
            _usage_exit(f"cannot resume from {path} (FAULTLINE_RESUME): {error}")
        states = state["rng"]
        # Each rank continues its own RNG stream; a 1-rank replay of an N-rank run takes rank 0's.
        _set_rng_state(states[self.rank] if len(states) == self.world_size else states[0])
        return state

    def _whole_state(self, step):
        """FSDP2: the model's and the optimizer's state of whole parameters, keyed by name and
        gathered onto rank 0's CPU from every rank's shards (torch.distributed.checkpoint's full
        state dict, a collective; the other ranks get empty dicts). Any number of ranks, with or
        without FSDP, loads it."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict
        self._collective("all_gather", step)
        return get_state_dict(self.module, self.optimizer,
                              options=StateDictOptions(full_state_dict=True, cpu_offload=True))

    def _load_whole_state(self, model_state, optimizer_state):
        """A format-2 checkpoint into this run's model and optimizer, sharded or not."""
        try:
            from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict
        except ImportError:
            raise ValueError("it holds the state of whole parameters keyed by name (format 2, "
                             f"an FSDP2 run's), which torch {torch.__version__} cannot load "
                             "(torch.distributed.checkpoint.state_dict: torch >= 2.2)") from None
        set_state_dict(self.module, self.optimizer, model_state_dict=model_state,
                       optim_state_dict=optimizer_state,
                       options=StateDictOptions(full_state_dict=True))

    def _load_shards(self, folder):
        """A format-3 checkpoint's shards into this run's model and optimizer, on any number of
        ranks, sharded or not (torch.distributed.checkpoint reshards as it loads; one process
        without a process group reads every shard)."""
        try:
            import torch.distributed.checkpoint as dcp
            from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
        except ImportError:
            raise ValueError("it holds torch.distributed.checkpoint's shards (format 3, an FSDP2 "
                             f"run's), which torch {torch.__version__} cannot load (torch >= "
                             "2.2)") from None
        model_state, optimizer_state = get_state_dict(self.module, self.optimizer)
        state = {"model": model_state, "optimizer": optimizer_state}
        with warnings.catch_warnings():  # alone, DCP warns that it assumes one process
            warnings.simplefilter("ignore", UserWarning)
            dcp.load(state, checkpoint_id=folder)
        set_state_dict(self.module, self.optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optimizer"])

    def _load_state(self, saved):
        """run.start(state=...) from a checkpoint's "state": the same names, or the replay would
        run on without some of it (or drop some of the run's)."""
        if set(saved) != set(self.state):
            raise ValueError(
                "the checkpoint's state is " + (", ".join(sorted(saved)) or "none") +
                ", run.start(state=...) names " + (", ".join(sorted(self.state)) or "none") +
                ": give run.start the same state the run that saved it had")
        for name, value in self.state.items():
            value.load_state_dict(saved[name])

    # -- inside -------------------------------------------------------------------------------

    def _collective(self, op, step):
        """Counts a collective; with several ranks, writes its heartbeat before it is entered."""
        self.collectives += 1
        if self.world_size > 1:
            self.metrics.event("collective", op=op, step=step, seq=self.collectives)

    def _norm(self, tensors, step):
        """The L2 norm of the tensors together, as a float (one host sync); under FSDP2 of the
        whole tensors: the ranks' sums of squares of their shards, summed in one allreduce (every
        rank calls it at the same point of the same step)."""
        if not self.fsdp:
            return _global_norm(tensors)
        import torch.distributed as dist
        self._collective("allreduce", step)
        with torch.no_grad():
            shards = [_local(t) for t in tensors]
            squares = torch.zeros((), dtype=torch.float64, device=self.device)
            if shards:
                norms = torch._foreach_norm(shards)  # in each shard's dtype: stacked in one
                squares += torch.stack([n.double() for n in norms]).square().sum()
            dist.all_reduce(squares)
            return math.sqrt(float(squares))

    def _nonfinite_counts(self, tensors, step):
        """The non-finite elements of each tensor (None: 0) as ints, in one host sync; under
        FSDP2 of the whole tensors, in one allreduce of the ranks' counts of their shards (every
        rank calls it at the same point of the same step)."""
        with torch.no_grad():
            counts = [(~torch.isfinite(_local(t))).sum() if t is not None
                      else torch.zeros((), dtype=torch.int64, device=self.device)
                      for t in tensors]
            counts = torch.stack(counts) if counts else torch.zeros(0, dtype=torch.int64)
            if self.fsdp:
                import torch.distributed as dist
                self._collective("allreduce", step)
                dist.all_reduce(counts)
            return [int(n) for n in counts.tolist()]

    def _attach_probes(self):
        """Full probes: a forward hook on every named module and a hook on every parameter's
        gradient. Attached at the first full step, so hooks the script registered (a planted
        fault) run before them and the probes see what the next module sees."""
        if self._probes_attached:
            return
        self._probes_attached = True
        for name, module in self.module.named_modules():
            if _plain_name(name):  # a compiled submodule and its _orig_mod: the same name
                module.register_forward_hook(self._forward_hook(_plain_name(name)))
        if self.fsdp:  # its sharded parameters get their gradients outside autograd
            return  # (the step's halt finds the gradient's site from them: _fsdp_grad_site)
        for name, parameter in self._named:
            parameter.register_hook(self._grad_hook(name))

    def _forward_hook(self, name):
        def hook(module, inputs, output):
            step = self._probing
            if step is None or step._forward_site is not None:
                return
            # Outside autograd: isfinite() of a tensor that requires grad saves it for a backward
            # pass, and activation checkpointing (torch.utils.checkpoint) needs its recomputed
            # forward, where this hook returns early once a site is found, to save what the
            # first forward saved, or the backward pass fails.
            with torch.no_grad():
                for tensor in _floating_tensors(output):
                    if bool(torch.isfinite(tensor).all()):
                        continue
                    bad = int((~torch.isfinite(tensor)).sum())
                    rows = None
                    micro = step._current
                    if micro is not None and tensor.dim() >= 1 and tensor.shape[0] == len(micro):
                        ok = torch.isfinite(tensor.reshape(tensor.shape[0], -1)).all(1)
                        rows = [micro[r] for r in torch.nonzero(~ok).flatten().tolist()]
                    step._forward_site = (name, bad, rows)
                    return
        return hook

    def _grad_hook(self, name):
        def hook(grad):
            step = self._probing
            if step is None or step._grad_site is not None:
                return None
            if not bool(torch.isfinite(grad).all()):
                step._grad_site = (name, int((~torch.isfinite(grad)).sum()))
            return None
        return hook


class Step:
    """One training step. Use it as a context manager around the whole step, in this order:

        for samples in s.micro_batches(batch, grad_accum): ... s.backward(loss, tokens=n)
        s.all_reduce()                  # the gradients averaged over the ranks (one collective)
        s.clip_grad_norm(max_norm)      # measures (and clips) the norm; the finiteness check
        optimizer.step(); scheduler.step()

    On leaving it writes the step record, the params fingerprint and the checkpoint when due.
    The step starts with no gradients (every parameter's .grad is set to None), so a resumed
    run computes exactly what the uninterrupted one did.
    After clip_grad_norm: s.loss, s.grad_norm and s.lr are Python floats.
    """

    def __init__(self, run, number):
        self._run = run
        self.number = int(number)
        self.batch = None         # the global batch given to micro_batches
        self.samples = None       # this rank's samples of it (after a replay)
        self.loss = self.grad_norm = self.lr = None
        self.skipped = False       # the loss scaler found the gradients non-finite: no update
        self.loss_scale = None
        self.tokens = 0
        self._micro_count = 1
        self._current = None
        self._loss_sum = None
        self._reduced = False
        self._checked = False
        self._ddp_sync = False     # the next backward pass is the one DDP synchronizes
        self._forward_site = None  # (module, count, sample indices or None)
        self._grad_site = None     # (parameter, count)
        self._phase = "data"
        self._data_ms = self._comm_ms = self._data_cpu = self._comm_cpu = 0.0
        self._rng = None
        self._eager = None         # at a full-probe step: the eager stance, left on exit

    # -- the context ----------------------------------------------------------------------------

    def __enter__(self):
        run = self._run
        self._t0, self._cpu0 = time.perf_counter(), time.thread_time()
        for _, parameter in run._named:
            parameter.grad = None
        if run.settings.checkpoint_on_halt:  # the state after step - 1, should this step halt
            self._rng = _rng_state()
        if run.settings.full_probes_at(self.number):
            run._attach_probes()
            run._probing = self
            # Compiled code would skip the probes' hooks: the step runs eagerly (its numerics
            # are eager's), and where nothing is compiled this changes nothing.
            self._eager = _eager_stance()
        return self

    def __exit__(self, kind, error, traceback):
        run = self._run
        run._probing = None
        if self._eager is not None:
            self._eager.__exit__(None, None, None)  # the stance the script had
            self._eager = None
        if error is not None:
            if _is_oom(error):
                self._halt_oom(error)
            if _nondeterministic_op(error):
                self._refuse_nondeterministic(error)
            return False  # a crash: no end event, as faultline expects of a dead run
        if not self._checked:  # late, after the update: no last good state to save
            self.clip_grad_norm(None, _late=True)
        self._finish()
        return False

    # -- the parts of a step ----------------------------------------------------------------

    def micro_batches(self, batch=None, grad_accum=1, loader=None):
        """This rank's samples of the global `batch`, as grad_accum x FAULTLINE_ACCUMULATE
        micro-batches (lists of global sample indices). At FAULTLINE_REPLAY_STEP: the replayed
        samples only, in one micro-batch (all of them on every rank in replica mode).
        With loader= (a run.data_loader()): the batch and grad_accum are the loader's, and each
        micro-batch comes loaded (what its collate_fn returns); the wait for it is data time."""
        if loader is not None:
            return self._loaded(loader)
        run, s = self._run, self._run.settings
        self.batch = [int(i) for i in batch]
        self.samples, micros, wanted = _plan_step(run, self.number, self.batch, grad_accum)
        # The batch of a step, for faultline to split or to replay on every rank: at the replay
        # step, at full-probe steps, and at every step of a run fingerprinted at every step.
        if (self.number == s.replay_step or s.full_probes_at(self.number)
                or s.fingerprint_every == 1):
            trained = [i for i in self.batch if i in wanted] if wanted is not None else self.batch
            run.metrics.event("batch", step=self.number, samples=trained,
                              rank_samples=self.samples)
        self._micro_count = len(micros)
        return self._each(micros)

    def sample_rng(self, sample):
        """run.sample_rng(this step, sample): augment a sample you load yourself inside it."""
        return self._run.sample_rng(self.number, sample)

    def batch_rng(self, samples):
        """A context in which random, torch's CPU generator and numpy draw the numbers of this
        step's micro-batch of `samples` (batch_seed): random work over a whole micro-batch you
        load yourself (masking across it) draws the same in a resumed run or a replay on fewer
        ranks. run.data_loader() calls its collate_fn in one. Your streams are restored."""
        return _seeded_host_rng(batch_seed(self._run.seed, self.number, samples))

    @property
    def micro_samples(self):
        """The global sample indices of the micro-batch being computed (None between them)."""
        return self._current

    def _loaded(self, loader):
        if not isinstance(loader, StepLoader):
            raise TypeError("micro_batches(loader=...) takes what run.data_loader() returns")
        batch = self._run.global_batch(self.number, loader.n_samples, loader.batch_size)
        for micro in self.micro_batches(batch, loader.grad_accum):
            with self.data():
                samples, data = loader.next()
            if samples != micro:
                raise RuntimeError(
                    f"step {self.number}: the data loader delivered samples {samples[:8]} where "
                    f"this micro-batch is {micro[:8]}; make the loader with run.data_loader() "
                    "after run.start(), and take every micro-batch of every step from "
                    "s.micro_batches(loader=...)")
            yield data

    def _each(self, micros):
        run = self._run
        for k, micro in enumerate(micros):
            self._current = micro
            self._phase = "forward"
            if k == 0 and run._ddp_broadcasts:  # the heartbeat of the buffers' broadcast
                run._collective("broadcast", self.number)
            if run.fsdp:  # the heartbeat of the forward pass's all-gathers of the parameters
                run._collective("all_gather", self.number)
            if not run.ddp:
                yield micro
            elif k == len(micros) - 1 and not self._local_grads():
                self._ddp_sync = True  # DDP's allreduce runs in this backward pass
                yield micro
            else:  # accumulate locally (and, in replica mode, keep the local gradient)
                with run._ddp.no_sync():
                    yield micro
        self._current = None

    def _local_grads(self):
        """Replica mode at the replay step: each rank's own gradient, fingerprinted before the
        allreduce."""
        s = self._run.settings
        return s.replay_ranks == "all" and s.replays(self.number)

    @contextlib.contextmanager
    def data(self):
        """Times the block as data loading (data_ms; outside cpu_ms)."""
        phase, self._phase = self._phase, "data"
        t0, cpu0 = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            self._data_ms += (time.perf_counter() - t0) * 1000
            self._data_cpu += (time.thread_time() - cpu0) * 1000
            self._phase = phase

    def backward(self, loss, tokens=0):
        """Back-propagates one micro-batch's mean loss, divided by the number of micro-batches
        (1 if you did not use micro_batches()), and adds it to the step's loss. No host sync."""
        self._phase = "backward"
        if self._ddp_sync:  # the heartbeat of DDP's allreduce, before the pass that runs it
            self._ddp_sync = False
            self._run._collective("allreduce", self.number)
        if self._run.fsdp:  # FSDP2's all-gathers and reduce-scatters in the backward pass
            self._run._collective("reduce_scatter", self.number)
        scaled = loss / self._micro_count
        scaler = self._run.scaler
        (scaler.scale(scaled) if scaler is not None else scaled).backward()
        value = scaled.detach().float()
        self._loss_sum = value if self._loss_sum is None else self._loss_sum + value
        self.tokens += int(tokens)

    def all_reduce(self):
        """Averages the gradients and the loss over the ranks in one allreduce (sum, then divide
        by WORLD_SIZE) and writes the grads fingerprint when due. With one rank only the
        fingerprint. In replica mode (FAULTLINE_REPLAY_RANKS=all) at the replay step the
        fingerprint is this rank's local gradient before the allreduce; otherwise the average."""
        if self._reduced:
            return
        self._reduced = True
        run, s = self._run, self._run.settings
        self._phase = "backward"
        params = [p for _, p in run._named]
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        loss = self._loss_sum if self._loss_sum is not None else torch.zeros((), device=run.device)
        replica = self._local_grads()
        due = self._fingerprint_due() or replica
        if replica and run.fsdp:
            run.end("error", error="replica mode under FSDP2")
            _usage_exit(f"step {self.number}: a replica check (FAULTLINE_REPLAY_RANKS=all) "
                        "compares each rank's own whole gradient, and under FSDP2 no rank has "
                        "one (the backward pass reduce-scatters them)")
        if (run.ddp or run.fsdp) and not replica:
            self._all_reduce_loss(loss, grads, due)
            return
        if run.world_size == 1:
            run.collectives += 1  # as faultline-train counts its one (empty) allreduce per step
            if due:
                self._write_fingerprint("grads", grads)
            self._loss_sum = loss
            return
        if replica and due:
            self._write_fingerprint("grads", grads)
        for p, g in zip(params, grads):
            p.grad = g  # a parameter without one gets the zeros the others are averaged with
        self._loss_sum = self._average_in_buckets(grads, loss.detach().reshape(1).clone())[0]
        if due and not replica:
            self._write_fingerprint("grads", grads)

    def _average_in_buckets(self, grads, loss):
        """Averages the gradients in place, and the loss, over the ranks (in float64 if any
        gradient is, else float32), in allreduces of about _ALLREDUCE_BUCKET elements under one
        heartbeat: a copy of every gradient at once would take as much memory again as they do.
        `loss` (one element, the caller's own copy) is averaged in place and returned."""
        dtype = _reduce_dtype(grads)
        loss = loss.to(dtype)  # averaged with the gradients, in their dtype

        def alone(tensor):  # large enough to be averaged in place, without a copy
            return (tensor.numel() >= _ALLREDUCE_BUCKET and tensor.dtype == dtype
                    and tensor.is_contiguous())

        buckets, bucket, size = [], [], 0
        for tensor in grads + [loss]:
            if bucket and (alone(tensor) or size + tensor.numel() > _ALLREDUCE_BUCKET):
                buckets.append(bucket)
                bucket, size = [], 0
            bucket.append(tensor)
            size += tensor.numel()
        buckets.append(bucket)

        def average(bucket):
            if len(bucket) == 1 and alone(bucket[0]):
                self._all_reduce(bucket[0])
                return
            flat = torch.cat([t.reshape(-1).to(dtype) for t in bucket])
            self._all_reduce(flat)
            offset = 0
            for t in bucket:
                t.copy_(flat[offset:offset + t.numel()].view_as(t))
                offset += t.numel()

        with self._timed_collective():
            for bucket in buckets:
                average(bucket)
        return loss

    def _all_reduce_loss(self, loss, grads, due):
        """Under DDP and FSDP2 the gradients came averaged out of the backward pass; the step's
        loss is averaged here, in a collective of its own (in the gradients' dtype, as the
        helper's own allreduce averages it with them)."""
        if due:
            self._write_fingerprint("grads", grads)
        total = loss.detach().reshape(1).to(_reduce_dtype(grads))
        self._average(total)
        self._loss_sum = total[0]

    def _average(self, tensor):
        """Averages `tensor` over the ranks in place: one allreduce, its heartbeat written first,
        timed as comm_ms."""
        with self._timed_collective():
            self._all_reduce(tensor)

    def _all_reduce(self, tensor):
        import torch.distributed as dist
        dist.all_reduce(tensor)
        tensor.div_(self._run.world_size)

    @contextlib.contextmanager
    def _timed_collective(self):
        """One allreduce heartbeat, written first, for the allreduces inside; timed as comm_ms."""
        run = self._run
        cuda = run.device.type == "cuda"
        if cuda:
            torch.cuda.synchronize(run.device)
        t0, cpu0 = time.perf_counter(), time.thread_time()
        run._collective("allreduce", self.number)
        yield
        if cuda:
            torch.cuda.synchronize(run.device)
        self._comm_ms += (time.perf_counter() - t0) * 1000
        self._comm_cpu += (time.thread_time() - cpu0) * 1000

    def clip_grad_norm(self, max_norm=None, _late=False):
        """Clips the gradients to `max_norm` (None or 0: measure only) and returns their norm
        before clipping. This is the finiteness check: one host sync for the loss and the norm.
        On NaN/Inf it writes the step record, the anomaly, the last good checkpoint when asked
        (FAULTLINE_CHECKPOINT_ON_HALT) and the end event, and exits 3 without the update.
        Call it before optimizer.step(). With a loss scaler it unscales the gradients first, and
        non-finite gradients with a finite loss are an overflow for the scaler to skip: the step
        is recorded as skipped, with the loss scale, and the run goes on."""
        if self._checked:
            return self.grad_norm
        self.all_reduce()
        self._checked = True
        run = self._run
        scaler = run.scaler
        if scaler is not None:
            self.loss_scale = float(scaler.get_scale())
            if not _late:  # late, scaler.step() has unscaled them already
                scaler.unscale_(run.optimizer)
        params = [p for _, p in run._named if p.grad is not None]
        if max_norm:  # DTensor gradients (FSDP2): an allreduce, a replicated DTensor norm
            if run.fsdp:
                run._collective("allreduce", self.number)
            norm = _local(torch.nn.utils.clip_grad_norm_(params, float(max_norm)))
        elif run.fsdp:
            norm = torch.tensor(run._norm([p.grad for p in params], self.number),
                                dtype=torch.float64)
        elif params:
            norm = torch.linalg.vector_norm(
                torch.stack([torch.linalg.vector_norm(p.grad.detach()) for p in params]))
        else:
            norm = torch.zeros((), device=run.device)
        self.loss, self.grad_norm = torch.stack([self._loss_sum.double(),
                                                 norm.double().to(self._loss_sum.device)]).tolist()
        if self.lr is None and run.optimizer is not None and run.optimizer.param_groups:
            self.lr = float(run.optimizer.param_groups[0]["lr"])
        self._phase = "optimizer"
        if scaler is not None and math.isfinite(self.loss) and not math.isfinite(self.grad_norm):
            self.skipped = True  # scaler.step() will not update; scaler.update() lowers the scale
            run.skipped_steps += 1
        elif not (math.isfinite(self.loss) and math.isfinite(self.grad_norm)):
            self._halt_nonfinite(before_update=not _late)
        return self.grad_norm

    def data_anomaly(self, sample, detail, where=""):
        """Reports a bad sample (e.g. a token id outside the vocabulary) and exits 4. `where`:
        its shard or file, if you know one."""
        run = self._run
        run.metrics.anomaly(self.number, "data", "data", where, detail, samples=[int(sample)],
                            shards=[where] if where else None)
        self._stop("data_anomaly", EXIT_DATA,
                   f"data anomaly at step {self.number}, sample {sample}: {detail}")

    # -- records ----------------------------------------------------------------------------

    def _fingerprint_due(self):
        every = self._run.settings.fingerprint_every
        return self._run.metrics.enabled and every > 0 and self.number % every == 0

    def _write_fingerprint(self, what, tensors):
        if self._run.metrics.enabled:
            if self._run.fsdp:  # of the whole tensors, as a run without FSDP has them
                self._run._collective("all_gather", self.number)
                print_ = fingerprint(tensors, _whole)
            else:
                print_ = fingerprint(tensors)
            self._run.metrics.write("fingerprint", dict(step=self.number, what=what, **print_))

    def _record(self, **extra):
        run = self._run
        step_ms = (time.perf_counter() - self._t0) * 1000
        cpu_ms = (time.thread_time() - self._cpu0) * 1000 - self._data_cpu - self._comm_cpu
        fields = dict(step=self.number, loss=self.loss, grad_norm=self.grad_norm, lr=self.lr,
                      step_ms=round(step_ms, 3), data_ms=round(self._data_ms, 3),
                      comm_ms=round(self._comm_ms, 3), cpu_ms=round(cpu_ms, 3),
                      tokens=self.tokens, collectives=run.collectives)
        if self.loss_scale is not None:
            fields.update(skipped=self.skipped, loss_scale=self.loss_scale)
        if run.device.type == "cuda":
            free, total = torch.cuda.mem_get_info(run.device)
            fields.update(mem_bytes=torch.cuda.memory_reserved(run.device), mem_total_bytes=total,
                          cuda_free_bytes=free,
                          cuda_max_allocated_bytes=torch.cuda.max_memory_allocated(run.device),
                          rss_bytes=_resident_bytes())
        else:
            fields.update(mem_bytes=_resident_bytes(), mem_total_bytes=_physical_memory())
        fields.update(extra)
        run.metrics.write("step", fields)
        run._last_run = self.number
        if run._steps_run == 0:
            run._first_loss = self.loss
        run._last_loss = self.loss
        run._steps_run += 1
        if run._steps_run > 2:  # the first steps pay one-time allocation costs
            run._timed_tokens += self.tokens
            run._timed_ms += step_ms

    def _finish(self):
        run, s = self._run, self._run.settings
        extra = {"nonfinite": 0}
        if s.probe != "off":
            param_norm = run._norm([p.detach() for _, p in run._named], self.number)
            extra["param_norm"] = param_norm
            if not math.isfinite(param_norm):
                counts = run._nonfinite_counts([p.detach() for _, p in run._named], self.number)
                grad_counts = run._nonfinite_counts([p.grad for _, p in run._named], self.number)
                extra["nonfinite"] = self._count_nonfinite(counts, grad_counts)
                self._record(**extra)
                name = self._first_bad(counts)
                run.metrics.anomaly(self.number, "nonfinite", "optimizer", name,
                                    "parameters became non-finite in the update", samples=None,
                                    shards=None, probe="cheap")
                self._stop("nonfinite", EXIT_NONFINITE,
                           f"parameters non-finite after the update at step {self.number}")
        self._record(**extra)
        if self._fingerprint_due():
            self._write_fingerprint("params", [p for _, p in run._named])
        if s.checkpoint_every > 0 and self.number % s.checkpoint_every == 0:
            run.save_checkpoint(self.number)

    def _first_bad(self, counts):
        """The first parameter with non-finite values, from _nonfinite_counts; "" if none."""
        return next((name for (name, _), n in zip(self._run._named, counts) if n), "")

    def _count_nonfinite(self, counts, grad_counts):
        """The step's non-finite values: the loss's, and the parameters' and their gradients'
        (_nonfinite_counts of each)."""
        return (0 if math.isfinite(self.loss) else 1) + sum(counts) + sum(grad_counts)

    def _halt_nonfinite(self, before_update):
        run, s = self._run, self._run.settings
        run._probing = None
        # The last good state goes to disk before the record that reports the failure: a
        # harness that stops the run on that record finds the checkpoint complete.
        if before_update and s.checkpoint_on_halt and self.number - 1 >= 1:
            run.save_checkpoint(self.number - 1, rng=self._rng)
        counts = run._nonfinite_counts([p.detach() for _, p in run._named], self.number)
        grad_counts = run._nonfinite_counts([p.grad for _, p in run._named], self.number)
        self._record(nonfinite=self._count_nonfinite(counts, grad_counts))
        if run.fsdp and s.full_probes_at(self.number) and self._grad_site is None:
            self._grad_site = self._fsdp_grad_site(grad_counts)
        record = {"samples": None, "shards": None}
        if self._forward_site is not None:
            name, bad, rows = self._forward_site
            record.update(phase="forward", where=name, probe="full", samples=rows,
                          detail=f"{bad} non-finite values in output")
            if self._grad_site is not None:
                record["first_grad"] = self._grad_site[0]
        elif self._grad_site is not None:
            name, bad = self._grad_site
            record.update(phase="backward", where=name, probe="full",
                          detail=f"{bad} non-finite gradient values")
        elif not math.isfinite(self.loss):
            record.update(phase="loss", where="loss", probe="cheap",
                          detail=f"loss is {_plain(self.loss)}; replay the step with "
                                 "FAULTLINE_PROBE=full to name the module")
        else:
            record.update(phase="backward", where=self._first_bad(grad_counts), probe="cheap",
                          detail="non-finite gradient norm with a finite loss")
        phase, where, detail = record.pop("phase"), record.pop("where"), record.pop("detail")
        run.metrics.anomaly(self.number, "nonfinite", phase, where, detail, **record)
        self._stop("nonfinite", EXIT_NONFINITE,
                   f"non-finite {phase} at step {self.number} ({where or 'unknown'}): {detail}")

    def _fsdp_grad_site(self, counts):
        """The full probes' gradient site under FSDP2, whose sharded parameters get their
        gradients from its reduce-scatter, never from autograd, so no gradient hook fires: of
        the parameters with non-finite reduced gradients, the one the backward pass reaches
        first, taken to be the last in the model's order (a model built in the order it runs)."""
        bad = [(name, n) for (name, _), n in zip(self._run._named, counts) if n]
        return bad[-1] if bad else None

    def _halt_oom(self, error):
        run = self._run
        run.metrics.anomaly(self.number, "oom", self._phase, "", f"out of memory: {error}"[:500],
                            samples=None, shards=None)
        self._stop("oom", EXIT_OOM, f"out of memory at step {self.number}: {error}")

    def _refuse_nondeterministic(self, error):
        """The script is fine; the helper's determinism is what stopped it: a usage error (exit
        2, which faultline reads as the run's set-up, not a crash to search), naming the way on."""
        op = _nondeterministic_op(error)
        self._run.end("error", error=f"{type(error).__name__}: {error}"[:500])
        _usage_exit(
            f"step {self.number}: {op} has no deterministic implementation on this device, and "
            "the helper asks torch for deterministic algorithms (replays from a checkpoint must "
            "be bitwise); fp.Run(..., determinism=\"warn\") runs it nondeterministically, with "
            "a warning (replays may then differ)")

    def _stop(self, status, code, message):
        run = self._run
        run._probing = None
        run._last_run = self.number
        run.end(status)
        sys.stdout.flush()
        sys.stderr.write(f"faultline_probe: halted: {message}\n")
        sys.stderr.flush()
        raise SystemExit(code)
