// The declared faces of the library: the headers that code outside src/ other than the tests
// (tools/, lab/, bench/) may include beside the public include/rmacc.h. scripts/check-layers.py
// --faces (the tools_use_only_faces test) fails on anything else, so a tool that wants more of
// the library adds it here, with its reason, or goes through rmacc.h. The benchmarks that talk
// to the network (lab/peers: fi-netbench, rmacc-netbench) need none: libfabric itself and
// rmacc.h. Each face below is a pure layer or a policy that the library and rmacc-sim both
// follow, so the simulator runs the library's own rules: a change here changes the model too
// (lab/sim/*_test.cc).
#pragma once

// The planner: plans, their ops and how the executor groups and hands them over. rmacc-sim runs
// the plans the library builds and rmacc-planbench times the planners themselves, so both need
// the planner, not rmacc.h (which runs plans but never shows one) nor a copy of it. The planner is
// a pure layer (no network, backend or thread), so this face brings no machinery with it.
#include "plan/completion_waits.h"
#include "plan/op_groups.h"
#include "plan/plan.h"
#include "plan/plan_build.h"
#include "plan/planner.h"
#include "plan/proxy_runs.h"
#include "plan/rank_planner.h"
#include "plan/verifier.h"

// What every layer uses, and the network's policies the simulator models: the pacer and the
// proxy-thread routing live in core/ because the library's proxy and the simulator's model
// both follow them (a rank's writes to a peer go through the thread proxyThreadOf names).
#include "core/error.h"
#include "core/nic_pacer.h"
#include "core/proxy_routing.h"
#include "core/signal_contexts.h"
#include "core/topology.h"
#include "core/trace_file.h"

// The parameter registry: rmacc-params (tools/) prints its tables into README.md and
// docs/configuration.md, so that they come from the declaration (config_test checks them).
#include "core/config.h"
