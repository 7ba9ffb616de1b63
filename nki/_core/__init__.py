"""The types nki.simulator, nki.isa and nki.language share, below all three of them.

``dtypes`` (NKI dtypes as numpy dtypes), ``buffers`` (hbm, sbuf, psum, ...), ``tensor``
(:class:`NkiTensor`, a strided view over one storage) and ``ops`` (the element-wise operator
table that ``nl.add`` and ``nisa.tensor_tensor(op=...)`` share). Internal: the public names are
re-exported by :mod:`nki.language` and :mod:`nki.isa`.

Import order inside nki, bottom to top: errors, _env, targets, typing -> _core -> simulator
(context, memory, cost, engine_io, checks, report) -> isa -> language -> simulator.runner, jit.
The Python operators of a tensor (``a + b``, ``t[i] = v``) are nki.language functions; the
language registers them here (:func:`ops.register_language`) when it is imported.
"""
