// Pinned host memory of the neuron device (pinned_host.cpp).
#pragma once

#include <c10/core/Allocator.h>

namespace torch_neuronx {

// The allocator behind `pin_memory()` / `pin_memory=True` for neuron.
c10::Allocator* pinned_block_allocator();
// True if `ptr` lies inside a live pinned block (start or interior), as
// CUDA's pointer attributes answer for any address of a page-locked range.
bool is_in_pinned_block(const void* ptr);

}  // namespace torch_neuronx
