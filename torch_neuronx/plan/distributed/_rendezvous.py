"""Peer-free rendezvous for dry runs: `init_process_group` gets a store that needs no other process.

A dry run starts one process per rank *role*, not per rank, so the usual rendezvous (env://,
tcp://, file://) would wait for peers that never come: rank 5 connects to a TCPStore on
MASTER_ADDR:MASTER_PORT that nobody serves. In a dry run these schemes instead yield torch's
FakeStore (what `init_process_group(backend="fake")` uses) with the rank and world size the
launcher (or the user's torchrun) set. Any later use of the store raises at once instead of
hanging; the dry-run process group never uses it.
"""
from __future__ import annotations

import importlib
import os
from urllib.parse import urlparse

# the module (torch.distributed re-exports a function of the same name)
_rdzv = importlib.import_module("torch.distributed.rendezvous")

SCHEMES = ("env", "tcp", "file")
_originals: dict = {}
_stores: list = []


def _number(query: dict, key: str, env_name: str, url: str) -> int:
    raw = query.get(key, os.environ.get(env_name))
    if raw in (None, ""):
        raise ValueError(f"dry run: init_process_group({url!r}) needs the {key}: pass {key}= or set "
                         f"{env_name} (python -m torch_neuronx.plan run sets it for every rank)")
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"dry run: {key}={raw!r} in init_process_group({url!r}) is not an integer") from None


def _store():
    """torch's FakeStore, with a message that says why where torch's would only say "Not implemented"."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    class PeerlessStore(FakeStore):
        def _refuse(self, *args, **kwargs):
            raise RuntimeError(
                "dry run: this process stands in for one rank and has no peers, so the rendezvous store "
                "cannot be used (a backend such as gloo connects its ranks through it). Use "
                "backend=\"neuron\" (it carries CPU tensors too) or leave backend unset.")

        set = get = add = compare_set = wait = check = delete_key = num_keys = multi_get = multi_set = _refuse

    store = PeerlessStore()
    _stores.append(store)   # the Python half must outlive the C++ references, or its methods are lost
    return store


def _peer_free(url: str, **kwargs):
    query = dict(p.split("=", 1) for p in urlparse(url).query.split("&") if "=" in p)
    rank = _number(query, "rank", "RANK", url)
    world_size = _number(query, "world_size", "WORLD_SIZE", url)
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"dry run: rank={rank} is not in a world of world_size={world_size}; "
                         "set RANK in 0..WORLD_SIZE-1")
    yield _store(), rank, world_size
    raise RuntimeError("dry run: re-rendezvous is not supported")


def install() -> None:
    """Route env://, tcp:// and file:// to the peer-free handler (idempotent)."""
    handlers = _rdzv._rendezvous_handlers
    for scheme in SCHEMES:
        if handlers.get(scheme) is not _peer_free:
            _originals.setdefault(scheme, handlers.get(scheme))
            handlers[scheme] = _peer_free


def uninstall() -> None:
    for scheme, handler in _originals.items():
        if handler is not None:
            _rdzv._rendezvous_handlers[scheme] = handler
    _originals.clear()
