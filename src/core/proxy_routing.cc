#include "core/proxy_routing.h"

namespace rmacc {

int defaultProxyThreads(int nodes) {
  return nodes >= 96 ? 16 : nodes >= 32 ? 8 : nodes >= 4 ? 4 : 1;
}

int proxyThreadOf(int from, int to, int threads, int nodes) {
  if (threads <= 1 || nodes <= 1) return 0;
  const int ahead = ((to - from) % nodes + nodes) % nodes;  // the round delta from `from`
  if (ahead < nodes - ahead || (2 * ahead == nodes && from < to)) return ahead % threads;
  return (nodes - ahead + threads / 2) % threads;  // the way back
}

}  // namespace rmacc
