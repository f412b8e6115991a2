// What the engines (RMA, executor, collective) use of their communicator, handed to them
// instead of the communicator itself, as Gloo's and MSCCL++'s engines take their transports:
// the layers below by reference, and two narrow views up (peers' memory, the communicator's
// failure handling) that comm/ implements. So exec/ includes nothing of comm/.
#pragma once

#include <string>
#include <vector>

#include "backend/backend.h"
#include "bootstrap/bootstrap.h"
#include "core/config.h"
#include "core/topology.h"
#include "exec/peer_memory.h"
#include "net/fabric.h"
#include "net/proxy.h"
#include "rmacc.h"

namespace rmacc {

class SignalSpace;
class TraceWriter;

// How a background engine reports a failure that ends the communicator (Comm implements it).
class FailureSink {
 public:
  // The first fatal error (and its text, when `text` is given); rmaccSuccess while healthy.
  virtual rmaccResult_t asyncError(std::string* text = nullptr) const = 0;
  // Records the first cause, releases every wait and tells every peer.
  virtual void poison(rmaccResult_t code, const std::string& text) = 0;
  // Every rank's call status, asked over the control plane (for timeout reports).
  virtual std::string describeRanks() = 0;

 protected:
  ~FailureSink() = default;  // not owned through this view
};

// Everything referenced outlives the engines (the communicator owns it and destroys the
// engines first).
struct EngineContext {
  int rank;
  int nRanks;
  const Config& cfg;
  const Topology& topo;
  Backend& backend;
  Bootstrap& bootstrap;
  Proxy* proxy;           // nullptr on a single node
  SignalSpace& signals;
  TraceWriter* trace;     // RMACC_TRACE_FILE; nullptr when unset
  // By rank: where a zero-byte proxy put (a pure signal) lands; empty on a single node.
  const std::vector<RemoteRegion>& signalTargets;
  // By rank: the peer's registered signal array, where this rank's credits and entry signals
  // are written as values (ProxyPut::writesValue, RMACC_NET_SIGNAL_WRITES); size 0 where they
  // go as completion data instead. Empty on a single node.
  const std::vector<RemoteRegion>& signalArrays;
  PeerMemory& memory;
  FailureSink& failures;
};

}  // namespace rmacc
