#include "report.h"

#include "core/error.h"

namespace rmacc::sim {

double boundAlgbw(const Cluster& c) {
  return c.nodes > 1 ? c.nicGBps * c.nodes / (c.nodes - 1) : 0;
}

void printReport(FILE* out, const SimOptions& o, const RunInfo& info, const Result& r) {
  const Cluster c = clusterFor(info.schedule, o.cluster);
  fprintf(out, "# rmacc-sim: %s schedule\n# cluster: %s\n# traffic: %s\n",
          scheduleName(info.schedule), c.describe().c_str(), o.traffic.describe().c_str());
  const std::string relay =
      info.slots ? strprintf(", %d relay slots of %llu bytes", info.slots,
                             (unsigned long long)info.slotBytes)
                 : std::string();
  fprintf(out, "# plan: %zu ops, %d batches%s, built%s in %.1f ms\n", info.ops, info.batches,
          relay.c_str(), o.verify && info.schedule == Schedule::kRmacc ? " and verified" : "",
          info.planMs);
  fprintf(out, "time %.1f us   algbw %.2f GB/s   busbw %.2f GB/s   (%.0f bytes/rank mean)\n",
          r.timeUs, r.algbw, r.busbw, r.meanBytesPerRank);
  if (c.nodes > 1) {
    const double b = boundAlgbw(c);
    fprintf(out, "bound N/(N-1) x NIC = %.2f GB/s algbw: %.2f of it\n", b, r.algbw / b);
    fprintf(out, "this traffic's bound (busiest node's bytes in or out over its %d NICs): "
            "%.1f us, %.2f of it\n", c.gpusPerNode, r.nodeBoundUs,
            r.timeUs > 0 ? r.nodeBoundUs / r.timeUs : 0.0);
  }
  fprintf(out, "host: enqueueing done at %.1f us; %s\n", r.hostUs,
          r.hostBound ? "HOST-BOUND: the host is more than half the critical path"
                      : "the host is not the bottleneck");
  fprintf(out, "proxy: the busiest spends %.1f us of CPU on its puts out and in (%.0f%% of the"
          " call); its busiest of %d thread(s) %.1f us, %s\n",
          r.proxyBusyMaxUs, r.timeUs > 0 ? 100 * r.proxyBusyMaxUs / r.timeUs : 0.0,
          r.proxyThreads, r.proxyThreadBusyMaxUs,
          r.proxyBound() ? strprintf("PROXY-BOUND: at most %.2f of the traffic's bound",
                                     r.proxyCeiling()).c_str()
                         : "within the traffic's bound");
  if (info.schedule != Schedule::kDirect)
    fprintf(out, "relay high-water %llu bytes held at once (capacity %llu)\n",
            (unsigned long long)r.relayHighWater, (unsigned long long)r.relayCapacity);
  const CriticalPath& cp = r.critical;
  fprintf(out,
          "critical path: %d ops; host %.1f us, copies %.1f us, network %.1f us, "
          "signals/waits/events %.1f us\n",
          cp.hops, cp.hostUs, cp.copyUs, cp.networkUs, cp.streamUs);
  for (const auto& line : cp.tail) fprintf(out, "  <- %s\n", line.c_str());
  fprintf(out, "utilisation (bytes / capacity x time):\n");
  for (const auto& u : r.utilisation)
    fprintf(out, "  %-14s x%-5d mean %5.1f%%  max %5.1f%% (%s)\n", u.kind.c_str(), u.count,
            100 * u.mean, 100 * u.max, u.busiest.c_str());
  if (!r.links.empty()) {
    fprintf(out, "links:\n");
    for (const auto& l : r.links) fprintf(out, "  %s\n", l.c_str());
  }
  fprintf(out, "(%llu events)\n\n", (unsigned long long)r.events);
}

void printJson(FILE* out, const SimOptions& o, const RunInfo& info, const Result& r) {
  const Cluster& c = o.cluster;
  const char* kinds[] = {"uniform", "random", "zipf", "moe"};
  fprintf(out,
          "{\"schedule\":\"%s\",\"nodes\":%d,\"gpus\":%d,\"nic\":%.3f,\"traffic\":\"%s\","
          "\"bytes_per_rank\":%.0f,\"time_us\":%.3f,\"algbw\":%.4f,\"busbw\":%.4f,"
          "\"bound_algbw\":%.4f,\"host_us\":%.3f,\"host_bound\":%s,\"relay_high_water\":%llu,"
          "\"cp_host_us\":%.3f,\"cp_copy_us\":%.3f,\"cp_network_us\":%.3f,\"cp_stream_us\":%.3f,"
          "\"proxy_busy_us\":%.3f,\"proxy_thread_busy_us\":%.3f,\"proxy_bound\":%s,"
          "\"node_bound_us\":%.3f,\"ops\":%zu,\"plan_ms\":%.1f,\"slots\":%d,"
          "\"slot_bytes\":%llu}\n",
          scheduleName(info.schedule), c.nodes, c.gpusPerNode, c.nicGBps,
          kinds[(int)o.traffic.kind], r.meanBytesPerRank, r.timeUs, r.algbw, r.busbw,
          boundAlgbw(c), r.hostUs, r.hostBound ? "true" : "false",
          (unsigned long long)r.relayHighWater, r.critical.hostUs, r.critical.copyUs,
          r.critical.networkUs, r.critical.streamUs, r.proxyBusyMaxUs, r.proxyThreadBusyMaxUs,
          r.proxyBound() ? "true" : "false", r.nodeBoundUs, info.ops,
          info.planMs, info.slots, (unsigned long long)info.slotBytes);
}

}  // namespace rmacc::sim
