// Data check: send blocks are filled from (source rank, destination rank, index in block), the
// receive buffer is poisoned first, and afterwards every element is compared: block elements
// against the value their source wrote, gap elements against the poison. The check is bitwise
// over the element size, so it works for every datatype (a float NaN pattern is just bits).
#pragma once

#include <cstddef>
#include <cstdint>

#include "counts.h"

namespace rmacc::perf {

// Fills the send blocks of `layout` (rank `me`) in a host buffer of layout.sendElems elements;
// gaps are poisoned too, so a read from a gap arrives as poison and is caught. `salt` changes
// every value: consecutive calls that send differently salted data expose a call whose data
// was overwritten by (or mixed with) its neighbour's.
void fillSend(void* host, const Layout& layout, int me, size_t elemSize, uint64_t salt = 0);

// Poisons a whole receive buffer of `elems` elements.
void poison(void* host, size_t elems, size_t elemSize);

// Number of wrong elements in a received host copy: misplaced or corrupt block elements, and
// gap elements that are no longer poison.
uint64_t verifyRecv(const void* host, const Layout& layout, int me, size_t elemSize, uint64_t salt = 0);

// The value of element `index` of the block src sends to dst (its low elemSize bytes are used).
uint64_t expectedValue(int src, int dst, uint64_t index, size_t elemSize, uint64_t salt = 0);

}  // namespace rmacc::perf
