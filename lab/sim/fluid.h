// A discrete-event, fluid-flow model of links: the clock, an event queue, resources with a
// capacity (bytes per microsecond) and transfers that cross a path of resources.
//
// Sharing rule: a transfer's rate is the smallest fair share along its path,
// min over its resources r of capacity(r) / activeTransfers(r). This is the "bottleneck fair
// share" approximation of max-min fairness: exact for one link, for flows that share one link,
// and for paths whose flows all meet the same bottleneck (every case the known-answer tests
// check); where a flow is held back elsewhere, the share it leaves unused on a link is not handed
// to the others, so the model errs slow, never fast. It keeps every update local (only the flows
// of the links a transfer touches are re-rated), which is what lets 1,024 ranks run in seconds.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <vector>

namespace rmacc::sim {

class Fluid {
 public:
  using Callback = std::function<void()>;

  // A resource carrying up to `bytesPerUs` (1 GB/s = 1,000 bytes/µs). `kind` groups resources
  // for the utilisation report ("nic-tx", "nvlink-in", ...).
  int addResource(const std::string& name, const std::string& kind, double bytesPerUs);

  // How transfers share resources. kBottleneck (the default): each flow re-rated alone to the
  // smallest fair share on its path (see above). kMaxMin: when a transfer starts or ends, the
  // flows on its path, and the flows beside them, are re-rated together by progressive filling
  // (max-min fairness) within what the other flows on their resources use now, so a flow held
  // back at one resource leaves its share of the others to its neighbours (a NIC serving
  // several queue pairs). It still never oversubscribes a resource; flows further away keep
  // their rates until an event of their own re-rates them, so it errs slow there.
  enum class Sharing { kBottleneck, kMaxMin };
  void setSharing(Sharing s) { sharing_ = s; }

  // Starts moving `bytes` across `path` now; `done` runs when the last byte has arrived.
  // A zero-byte transfer or an empty path completes at once (at the current time).
  void transfer(double bytes, const std::vector<int>& path, Callback done);

  // Runs `fn` at time `t` (µs, >= now()).
  void at(double t, Callback fn);
  double now() const { return now_; }

  // Runs events until none is left. Returns the time of the last one.
  double run();

  struct Resource {
    std::string name, kind;
    double capacity = 0;      // bytes per µs
    double carried = 0;       // bytes moved through it so far
    std::vector<int> flows;   // active transfers
  };
  const std::vector<Resource>& resources() const { return res_; }
  uint64_t events() const { return events_; }

 private:
  struct Flow {
    std::vector<int> path;
    std::vector<int> slot;   // position in each resource's flow list
    double remaining = 0;    // bytes
    double rate = 0;         // bytes per µs
    double since = 0;        // time `remaining` was last brought up to date
    uint64_t version = 0;    // bumps on every re-rating; stale completion events are ignored
    Callback done;
    bool active = false;
  };
  struct Event {
    double t;
    uint64_t seq;
    int flow;            // >= 0: completion of this flow (if version matches)
    uint64_t version;
    int callback;        // >= 0: index into callbacks_
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };

  void advance(Flow& f);
  void rerate(int id);
  void touch(const std::vector<int>& path, int except);
  void fill(const std::vector<int>& path);
  void finishFlow(int id);
  void schedule(int id);

  Sharing sharing_ = Sharing::kBottleneck;
  // fill()'s scratch, indexed by resource: remaining capacity, flows still to fix, and a stamp
  // saying which fill() last set them; flowStamp_ marks a fill's flows (open, then fixed).
  struct Scratch {
    double left = 0;
    int open = 0;
    uint64_t stamp = 0;
  };
  std::vector<Scratch> scratch_;
  std::vector<uint64_t> flowStamp_;
  std::vector<double> rateBefore_;  // fill: the group's rates before it
  static constexpr size_t kBesideMostFlows = 16;  // fill: see there
  uint64_t stamp_ = 0;
  double now_ = 0;
  uint64_t seq_ = 0, events_ = 0;
  std::vector<Resource> res_;
  std::vector<Flow> flows_;
  std::vector<int> freeFlows_;
  std::vector<Callback> callbacks_;
  std::vector<int> freeCallbacks_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> queue_;
};

}  // namespace rmacc::sim
