#include "fluid.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace rmacc::sim {

int Fluid::addResource(const std::string& name, const std::string& kind, double bytesPerUs) {
  RMACC_ARG_CHECK(bytesPerUs > 0, "resource %s needs a capacity > 0, got %g", name.c_str(),
                  bytesPerUs);
  res_.push_back({name, kind, bytesPerUs, 0, {}});
  return (int)res_.size() - 1;
}

void Fluid::at(double t, Callback fn) {
  int id;
  if (freeCallbacks_.empty()) {
    id = (int)callbacks_.size();
    callbacks_.push_back(std::move(fn));
  } else {
    id = freeCallbacks_.back();
    freeCallbacks_.pop_back();
    callbacks_[id] = std::move(fn);
  }
  queue_.push({std::max(t, now_), seq_++, -1, 0, id});
}

// Brings a flow's remaining bytes up to now at its current rate, crediting its resources.
void Fluid::advance(Flow& f) {
  const double moved = std::min(f.remaining, f.rate * (now_ - f.since));
  f.remaining -= moved;
  for (int r : f.path) res_[r].carried += moved;
  f.since = now_;
}

void Fluid::schedule(int id) {
  Flow& f = flows_[id];
  const double t = f.rate > 0 ? now_ + f.remaining / f.rate : std::numeric_limits<double>::max();
  queue_.push({t, seq_++, id, ++f.version, -1});
}

void Fluid::rerate(int id) {
  Flow& f = flows_[id];
  advance(f);
  double rate = std::numeric_limits<double>::max();
  for (int r : f.path) rate = std::min(rate, res_[r].capacity / (double)res_[r].flows.size());
  f.rate = rate;
  schedule(id);
}

// Re-rates every active flow that shares a resource with `path`: each once and alone but
// `except` (bottleneck), or all of them together (max-min, fill).
void Fluid::touch(const std::vector<int>& path, int except) {
  if (sharing_ == Sharing::kMaxMin) {
    fill(path);
    return;
  }
  std::vector<int> seen;
  for (int r : path) {
    for (int g : res_[r].flows) {
      if (g == except || std::find(seen.begin(), seen.end(), g) != seen.end()) continue;
      seen.push_back(g);
      rerate(g);
    }
  }
}

// Max-min rates for the flows on `path`'s resources and the flows beside them (sharing a
// resource with one of those), by progressive filling: every resource they cross offers what
// its other flows (held at their rates) leave; the resource with the lowest level (what it has
// left over its flows still open) fixes its open flows at that level, which takes it from every
// resource they cross; repeat. Levels only rise as flows are fixed (a fixed flow takes no more
// than the level it leaves behind), so a heap with stale entries skipped finds the next lowest.
// Why the flows beside: a flow on the path whose rate falls leaves room on its other resources
// that only their flows can take, and one whose rate should rise may be held down by a flow
// beside it that took that resource earlier. Re-rating the path's flows alone left both stale:
// a writer's NIC sent below its rate while its flows waited at receivers whose other writers
// held rates from before (rmacc-sim, uniform 16 MiB on 64 x 8 GPUs: NIC busy 345 us to carry
// 330 us of bytes, bench/results §35). Two resources further changes nothing measured there. The
// flows beside come from resources of at most kBesideMostFlows flows: one flow's change moves
// each of many by little, and taking in every direct put into a receiver that hundreds share
// made the direct schedule's runs 40 times longer (zipf 16 MiB, 32 x 8 GPUs: 151 s against
// 3.5; 10.5 s with the cap, and the same times as without it at 16 nodes).
void Fluid::fill(const std::vector<int>& path) {
  ++stamp_;
  scratch_.resize(res_.size());
  flowStamp_.resize(flows_.size(), 0);
  std::vector<int> group, touched;
  auto join = [&](int r) {
    for (int g : res_[r].flows)
      if (flowStamp_[g] != stamp_) {
        flowStamp_[g] = stamp_;
        group.push_back(g);
      }
  };
  for (int r : path) join(r);
  for (size_t i = 0, onPath = group.size(); i < onPath; ++i)
    for (int r : flows_[group[i]].path)
      if (res_[r].flows.size() <= kBesideMostFlows) join(r);
  // A flow whose rate comes out unchanged keeps its completion event (most of those beside).
  std::vector<double>& before = rateBefore_;
  before.clear();
  for (int g : group) before.push_back(flows_[g].rate);
  for (int g : group) {
    advance(flows_[g]);
    for (int r : flows_[g].path) {
      Scratch& s = scratch_[r];
      if (s.stamp != stamp_) {
        s = {res_[r].capacity, 0, stamp_};
        for (int h : res_[r].flows)
          if (flowStamp_[h] != stamp_) s.left -= flows_[h].rate;
        touched.push_back(r);
      }
      ++s.open;
    }
  }
  using Level = std::pair<double, int>;
  std::priority_queue<Level, std::vector<Level>, std::greater<Level>> heap;
  auto level = [&](int r) { return std::max(0.0, scratch_[r].left) / scratch_[r].open; };
  for (int r : touched) heap.push({level(r), r});
  const uint64_t open = stamp_, fixed = ++stamp_;  // a group flow's stamp: open, then fixed
  while (!heap.empty()) {
    const auto [lvl, r] = heap.top();
    heap.pop();
    if (scratch_[r].open == 0 || lvl != level(r)) continue;  // done, or a stale entry
    for (int g : res_[r].flows) {
      if (flowStamp_[g] != open) continue;
      flowStamp_[g] = fixed;
      Flow& f = flows_[g];
      f.rate = lvl;
      for (int q : f.path) {
        scratch_[q].left -= lvl;
        if (--scratch_[q].open > 0 && q != r) heap.push({level(q), q});
      }
    }
  }
  for (size_t j = 0; j < group.size(); ++j)
    if (flows_[group[j]].rate != before[j]) schedule(group[j]);
}

void Fluid::transfer(double bytes, const std::vector<int>& path, Callback done) {
  if (bytes <= 0 || path.empty()) {
    at(now_, std::move(done));
    return;
  }
  int id;
  if (freeFlows_.empty()) {
    id = (int)flows_.size();
    flows_.emplace_back();
  } else {
    id = freeFlows_.back();
    freeFlows_.pop_back();
  }
  // Neighbours move at their old rates up to now before the new flow changes their shares.
  for (int r : path)
    for (int g : res_[r].flows) advance(flows_[g]);
  Flow& f = flows_[id];
  f.path = path;
  f.slot.assign(path.size(), 0);
  f.remaining = bytes;
  f.since = now_;
  f.done = std::move(done);
  f.rate = -1;  // no completion event yet: the first re-rating schedules one
  f.active = true;
  for (size_t k = 0; k < path.size(); ++k) {
    f.slot[k] = (int)res_[path[k]].flows.size();
    res_[path[k]].flows.push_back(id);
  }
  if (sharing_ == Sharing::kBottleneck) rerate(id);
  touch(path, id);
}

void Fluid::finishFlow(int id) {
  Flow& f = flows_[id];
  advance(f);
  for (int r : f.path) res_[r].carried += f.remaining;  // rounding leftovers
  for (size_t k = 0; k < f.path.size(); ++k) {
    auto& list = res_[f.path[k]].flows;
    const int pos = f.slot[k], moved = list.back();
    list[pos] = moved;
    list.pop_back();
    if (moved != id) {
      Flow& m = flows_[moved];
      for (size_t q = 0; q < m.path.size(); ++q)
        if (m.path[q] == f.path[k] && m.slot[q] == (int)list.size()) m.slot[q] = pos;
    }
  }
  f.active = false;
  ++f.version;
  Callback done = std::move(f.done);
  std::vector<int> path = std::move(f.path);
  freeFlows_.push_back(id);
  touch(path, -1);
  done();
}

double Fluid::run() {
  while (!queue_.empty()) {
    Event e = queue_.top();
    queue_.pop();
    if (e.flow >= 0) {
      if (!flows_[e.flow].active || flows_[e.flow].version != e.version) continue;
      now_ = e.t;
      ++events_;
      finishFlow(e.flow);
    } else {
      now_ = e.t;
      ++events_;
      Callback fn = std::move(callbacks_[e.callback]);
      freeCallbacks_.push_back(e.callback);
      fn();
    }
  }
  return now_;
}

}  // namespace rmacc::sim
