#include "report_links.h"

#include <cstdio>
#include <map>

namespace rmacc::sim {

void summariseLinks(const std::vector<Fluid::Resource>& resources, double timeUs, Result& res) {
  std::map<std::string, Utilisation> byKind;
  std::vector<std::string> order;
  for (const auto& r : resources) {
    const double u = timeUs > 0 ? r.carried / (r.capacity * timeUs) : 0;
    auto [it, fresh] = byKind.try_emplace(r.kind);
    Utilisation& k = it->second;
    if (fresh) {
      k.kind = r.kind;
      order.push_back(r.kind);
    }
    k.mean += u;
    if (u >= k.max) {
      k.max = u;
      k.busiest = r.name;
    }
    ++k.count;
    if (resources.size() <= 32) {
      char line[160];
      snprintf(line, sizeof line, "%-24s %6.1f%%  %.3f GB moved", r.name.c_str(), 100 * u,
               r.carried / 1e9);
      res.links.push_back(line);
    }
  }
  for (const auto& kind : order) {
    Utilisation k = byKind[kind];
    k.mean /= k.count;
    res.utilisation.push_back(k);
  }
}

}  // namespace rmacc::sim
