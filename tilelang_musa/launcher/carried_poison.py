"""Checked mode across launches: the bytes of a returned output that its kernel never wrote, kept until the output
comes back as an input.

On the simulator the launcher fills the outputs it allocates with poison (0xFF bytes), and in checked mode the
kernel library records which bytes the call wrote (src/tl_templates/sim/sim/poisoned_globals.h). After a checked
call, an output with bytes that still hold the poison and that nothing wrote gets a record here: those bytes, the
kernel and the output's name. When a tensor on the same storage is an input of a later call, the launcher registers
the storage again with those bytes as still unwritten, so that a read of one of them is the same error as within a
launch, naming the kernel that allocated the tensor. After that call the record is updated (what it wrote is no
longer unwritten) or dropped.

What counts as written since: the check at the read needs the byte to still hold the poison, so any write that
changed it is seen whatever made it. A torch write of the poison bytes themselves (`t[..] = -1` on an int tensor)
would not be; so a record is dropped once the tensor's version counter moved, which every in-place torch operation
on the tensor or a view of it bumps (a write through `.data`, numpy or a raw pointer does not: only a write of the
exact poison bytes that way could still be reported). A call that ran unchecked drops the records of its inputs
(its writes were not recorded).

Nothing here keeps a tensor alive: records are keyed by the storage's data pointer and hold a weak reference to the
storage (torch keeps one Python object per storage while it lives), whose callback drops the record when it is freed.
Outside checked mode the table stays empty, and the launcher's only cost is a test of its truthiness.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch


@dataclass(eq=False)
class _Record:
    storage: weakref.ref   # the storage's Python object; dead: the record is dropped
    nbytes: int
    version: int           # the version counter of the tensors on it when the record was taken
    unwritten: torch.Tensor  # uint8 [nbytes], 1 where the poison was never written
    origin: bytes          # the report's text after "at element N, " (NUL-terminated for C)


_records: dict[int, _Record] = {}


def any_records() -> bool:
    return bool(_records)


def _origin(kernel_name: str, output_name: str) -> bytes:
    return (f"which kernel '{kernel_name}' returned as its output `{output_name}` (the launcher allocated it and "
            "filled it with poison) and which no thread of that launch or a later one has written (fill it before "
            "this launch, or have that kernel write it)").encode() + b"\0"


def lookup(tensor: torch.Tensor) -> tuple[int, _Record] | None:
    """The record of `tensor`'s storage, if an earlier checked call left poison unwritten in it and nothing changed
    the tensor from torch since (then the record is dropped)."""
    storage = tensor.untyped_storage()
    address = storage.data_ptr()
    record = _records.get(address)
    if record is None:
        return None
    if record.storage() is not storage or record.nbytes != storage.nbytes():
        _records.pop(address, None)
        return None
    if tensor._version != record.version:  # written in place from torch since: forget it
        _records.pop(address, None)
        return None
    return address, record


def remember(tensor: torch.Tensor, unwritten: torch.Tensor, kernel_name: str, output_name: str) -> None:
    """Keep, for `tensor` (an output the launcher allocated), the bytes of its storage it left unwritten."""
    storage = tensor.untyped_storage()
    address = storage.data_ptr()

    def drop(ref, address=address):
        record = _records.get(address)
        if record is not None and record.storage is ref:
            del _records[address]

    _records[address] = _Record(weakref.ref(storage, drop), storage.nbytes(), tensor._version, unwritten,
                                _origin(kernel_name, output_name))


def update(address: int, tensor: torch.Tensor, unwritten: torch.Tensor | None) -> None:
    """After a call that read the record at `address` through `tensor`: its bytes still unwritten (None: unknown,
    the call ran unchecked, or none left): kept, or the record dropped."""
    record = _records.get(address)
    if record is None:
        return
    if unwritten is None:
        del _records[address]
    else:
        record.unwritten = unwritten
        record.version = tensor._version


def forget_all() -> None:
    _records.clear()
