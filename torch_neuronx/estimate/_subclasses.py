"""Which ops a dispatch mode must let a tensor subclass run first, shared by the eager and graph estimates."""
from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten

_PLAIN_DISPATCH = torch.Tensor.__torch_dispatch__   # plain tensors and Parameters do not override it


def defer_to_subclass(types, args, kwargs) -> bool:
    """An argument is a tensor subclass with its own dispatch (DTensor, FSDP's and TP's shards, ...),
    other than FakeTensor (tracing): the subclass must dispatch first, so that the ops it runs on its
    local tensors, the shapes a core really computes, are the ones estimated (a dispatch mode then
    returns NotImplemented). `types` (the dispatch's) rules out plain ops cheaply."""
    if all(t is torch.Tensor or t is torch.nn.Parameter for t in types):
        return False
    for t in tree_flatten((args, kwargs))[0]:
        if isinstance(t, torch.Tensor) and type(t).__torch_dispatch__ is not _PLAIN_DISPATCH \
                and not isinstance(t, torch._subclasses.FakeTensor):
            return True
    return False
