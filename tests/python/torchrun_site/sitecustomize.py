"""Debian sid's torch is built without libuv, and torchrun's rendezvous stores ask for it
(USE_LIBUV=0 is not read where torchrun and env:// make them): every TCPStore is made without
libuv. Put on PYTHONPATH by `tests/python/current_torch.sh torchrun` only."""
import sys

import torch.distributed as dist

_TCPStore = dist.TCPStore


class TCPStore(_TCPStore):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("use_libuv", False)
        super().__init__(*args, **kwargs)


dist.TCPStore = TCPStore
# `torch.distributed.rendezvous` as an attribute is a function of that name: the module's own
# global is replaced through sys.modules.
sys.modules["torch.distributed.rendezvous"].TCPStore = TCPStore
