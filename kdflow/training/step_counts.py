"""What a training step costs the host, counted on any device: the operators it dispatches and the places where it
would wait for the device (a host sync). The tests and ``benchmarks/step_overhead.py`` read them on CPU, where a
step's time is mostly host work and a sync costs nothing, so that what a CUDA step would stall on is found without
a GPU.

A host sync is a call that needs a tensor's value on the host: ``item``, ``tolist``, ``__bool__``, ``__float__``,
``__int__``, ``__index__``, ``numpy`` and ``cpu`` (counted at the Python API, since on a CPU tensor they do no
device work; kdflow moves results to the host with ``cpu()``, never ``to("cpu")``, which on CPU cannot be told
from a move to the device), and the operators whose output shape depends on the data, which read it back on a GPU
(``nonzero``, boolean indexing and ``masked_select``, counted at dispatch).
"""

from __future__ import annotations

from collections import Counter

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

SYNC_METHODS = {"item", "tolist", "__bool__", "__float__", "__int__", "__index__", "numpy", "cpu"}
SYNC_OPERATORS = {"nonzero", "masked_select", "unique_consecutive", "_unique2"}


def _name(func) -> str:
    return getattr(func, "__name__", str(func))


class _SyncMethods(TorchFunctionMode):
    def __init__(self, counts: Counter):
        super().__init__()
        self.counts = counts

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = _name(func)
        if name in SYNC_METHODS:
            self.counts[name] += 1
        return func(*args, **(kwargs or {}))


class _Operators(TorchDispatchMode):
    def __init__(self, counts: Counter, syncs: Counter):
        super().__init__()
        self.counts, self.syncs = counts, syncs

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.counts[name] += 1
        if name in SYNC_OPERATORS:
            self.syncs[name] += 1
        elif name == "index" and any(isinstance(i, torch.Tensor) and i.dtype == torch.bool
                                     for i in (args[1] if len(args) > 1 else ())):
            self.syncs["boolean index"] += 1
        return func(*args, **(kwargs or {}))


class StepCounts:
    """A context manager that counts, while it is open, the host syncs (``syncs``: name -> calls) and the
    dispatched operators (``operators``: name -> calls; ``ops`` their total) of what runs in this thread.
    ``item`` and its like dispatch ``_local_scalar_dense`` too: each is counted once, by its Python name."""

    def __init__(self):
        self.syncs: Counter = Counter()
        self.operators: Counter = Counter()
        self._dispatched_syncs: Counter = Counter()
        self._modes = (_SyncMethods(self.syncs), _Operators(self.operators, self._dispatched_syncs))

    def __enter__(self) -> StepCounts:
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(*exc)
        scalar_reads = sum(self.syncs[name] for name in ("item", "tolist", "__bool__", "__float__", "__int__",
                                                         "__index__"))
        extra = Counter(self._dispatched_syncs)
        extra["_local_scalar_dense"] = max(0, extra["_local_scalar_dense"] - scalar_reads)
        self.syncs.update(+extra)

    @property
    def ops(self) -> int:
        return sum(self.operators.values())

    @property
    def host_syncs(self) -> int:
        return sum(self.syncs.values())
