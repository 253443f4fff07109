"""Kernel outputs placed as the library declares (docs/python.md, "Outputs"): one allocation
per output that has its own, the others views of it (as torch.split returns slices), and the
check of out= tensors. Pure torch on the CPU: the functions a Kernel calls around a launch."""
from types import SimpleNamespace

import torch

from strata.kernel import dense_placement, output_allocations, output_views, placed_as_declared

# Q, K, V: the column blocks 0-4, 4-6 and 6-8 of a [3, 8] product, packed in Q's allocation,
# then an output O of its own.
OUTPUTS = [SimpleNamespace(name=n, dtype="f16", shape=s)
           for n, s in (("Q", (3, 4)), ("K", (3, 2)), ("V", (3, 2)), ("O", (2, 5)))]
PLACEMENT = [{"base": 0, "offset": 0, "strides": [8, 1], "alloc": 24},
             {"base": 0, "offset": 4, "strides": [8, 1], "alloc": 0},
             {"base": 0, "offset": 6, "strides": [8, 1], "alloc": 0},
             {"base": 3, "offset": 0, "strides": [5, 1], "alloc": 10}]


def test_packed_outputs_are_views_of_one_allocation():
    allocations = output_allocations(OUTPUTS, PLACEMENT, "cpu")
    assert [tuple(a.shape) for a in allocations] == [(24,), (2, 5)]
    assert all(a.dtype == torch.float16 for a in allocations)
    q, k, v, o = output_views(OUTPUTS, PLACEMENT, allocations)
    # The product's elements are their positions: the views are its column blocks.
    allocations[0].copy_(torch.arange(24, dtype=torch.float16))
    product = torch.arange(24, dtype=torch.float16).reshape(3, 8)
    for view, want in zip((q, k, v), torch.split(product, [4, 2, 2], dim=1)):
        assert view.shape == want.shape and view.stride() == want.stride()
        assert torch.equal(view, want)
    assert o is allocations[1] and o.is_contiguous()
    assert placed_as_declared(OUTPUTS, PLACEMENT, [q, k, v, o])


def test_dense_outputs_are_tensors_of_their_own():
    placement = dense_placement(OUTPUTS)
    assert placement[1] == {"base": 1, "offset": 0, "strides": [2, 1], "alloc": 6}
    allocations = output_allocations(OUTPUTS, placement, "cpu")
    assert [tuple(a.shape) for a in allocations] == [s.shape for s in OUTPUTS]
    views = output_views(OUTPUTS, placement, allocations)
    assert all(v is a for v, a in zip(views, allocations))


def test_out_tensors_must_be_placed_as_declared():
    q, k, v, o = output_views(OUTPUTS, PLACEMENT, output_allocations(OUTPUTS, PLACEMENT, "cpu"))
    other = output_views(OUTPUTS, PLACEMENT, output_allocations(OUTPUTS, PLACEMENT, "cpu"))
    assert not placed_as_declared(OUTPUTS, PLACEMENT, [q, other[1], v, o])  # K elsewhere
    assert not placed_as_declared(OUTPUTS, PLACEMENT, [q, v, k, o])  # K and V swapped
    dense = [torch.empty(s.shape, dtype=torch.float16) for s in OUTPUTS]
    assert not placed_as_declared(OUTPUTS, PLACEMENT, dense)
