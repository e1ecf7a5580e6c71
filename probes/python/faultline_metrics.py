"""Speak faultline's metrics protocol (docs/metrics-protocol.md) from a Python trainer.

Dependency-free: only the standard library. torch and numpy objects are accepted where noted,
but torch is never imported at module import time.

    from faultline_metrics import MetricsWriter
    metrics = MetricsWriter()              # FAULTLINE_METRICS and RANK from the environment
    metrics.start({"lr": 3e-4, "steps": 1000})
    metrics.step(step, loss, grad_norm, lr, step_ms, tokens=tokens)
    metrics.end()

Every record is one JSON object on one line with "v": 1, "rank", "t" (seconds since the writer
was made) and "type", written and flushed at once. Non-finite floats are written as the strings
"nan", "inf" and "-inf" (JSON has no NaN).
"""

import hashlib
import json
import math
import os
import socket
import time

__all__ = ["MetricsWriter", "fingerprint_hash", "PROTOCOL_VERSION"]

PROTOCOL_VERSION = 1
PHASES = ("forward", "backward", "optimizer", "loss", "data")
_RESERVED = ("v", "rank", "t", "type")


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


def _chunks(data):
    """The bytes of `data`, in order: bytes-like, a torch tensor, a numpy array, or an iterable
    of those (e.g. model.parameters())."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        yield bytes(data)
    elif hasattr(data, "detach"):  # a torch tensor
        tensor = data.detach().cpu().contiguous()
        try:
            yield tensor.numpy().tobytes()
        except (TypeError, RuntimeError):  # bfloat16 and other dtypes numpy lacks
            import torch  # already loaded: the caller holds a tensor

            yield tensor.reshape(-1).view(torch.uint8).numpy().tobytes()
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


class MetricsWriter:
    """Appends protocol records to one rank's metrics file.

    path: the file; default $FAULTLINE_METRICS. With neither, the writer is disabled (every
    method does nothing), so a trainer can call it unconditionally when run outside faultline.
    rank: default $RANK, else 0.
    """

    def __init__(self, path=None, rank=None):
        self.path = path or os.environ.get("FAULTLINE_METRICS") or None
        self.rank = int(rank if rank is not None else os.environ.get("RANK", "0") or 0)
        self._start = time.monotonic()
        self._file = open(self.path, "a", encoding="utf-8") if self.path else None

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
        canonical = json.dumps(_plain(config), sort_keys=True, separators=(",", ":"))
        defaults = {
            "config": config,
            "config_hash": hashlib.blake2b(canonical.encode(), digest_size=8).hexdigest(),
            "world_size": int(os.environ.get("WORLD_SIZE", "1") or 1),
            "local_rank": int(os.environ.get("LOCAL_RANK", str(self.rank)) or self.rank),
            "host": os.environ.get("FAULTLINE_HOST") or socket.gethostname(),
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

    def fingerprint(self, step, what, tensor_or_bytes):
        """A "fingerprint" record: what is "params" or "grads"; the hash is fingerprint_hash()."""
        self.write("fingerprint", dict(step=int(step), what=what,
                                       hash=fingerprint_hash(tensor_or_bytes)))

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
