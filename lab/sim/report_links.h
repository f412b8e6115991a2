// Link utilisation: bytes each resource carried over its capacity times the call's time.
#pragma once

#include <vector>

#include "fluid.h"
#include "runner.h"

namespace rmacc::sim {

// Fills res.utilisation (per kind: count, mean, max, busiest) and, when there are at most 32
// resources, res.links (one line each).
void summariseLinks(const std::vector<Fluid::Resource>& resources, double timeUs, Result& res);

}  // namespace rmacc::sim
