// The declared faces of the library: the headers that code outside src/ other than the tests
// may include beside the public include/rmacc.h. The lab (lab/: the simulator, the probes, the
// peer benchmarks) includes only these, rmacc.h and tools/perf's harness, and
// scripts/check-layers.py --lab fails on anything else. Each face is a pure layer or a policy
// that the library and rmacc-sim both follow, so the simulator runs the library's own rules:
// a change here changes the model too (lab/sim/sim_test.cc).
#pragma once

// The planner: plans, their ops and how the executor groups and hands them over.
#include "plan/completion_waits.h"
#include "plan/op_groups.h"
#include "plan/plan.h"
#include "plan/plan_build.h"
#include "plan/planner.h"
#include "plan/proxy_runs.h"
#include "plan/rank_planner.h"
#include "plan/verifier.h"

// What every layer uses, and the network's policies the simulator models.
#include "core/error.h"
#include "core/nic_pacer.h"
#include "core/proxy_routing.h"
#include "core/signal_contexts.h"
#include "core/topology.h"
#include "core/trace_file.h"
