// Command-line options of rmacc-perf and mpi-alltoallv, nccl-tests style (-b -e -f -n -w -c -d)
// plus rmacc's own (-m windows, -j JSON lines, --pattern/--seed for alltoallv counts).
// Pure C++: no rmacc calls, so the MPI baseline parses exactly the same flags.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "rmacc.h"

namespace rmacc::perf {

// How alltoallv splits a rank's total across destinations (counts.h).
enum class Pattern { kUniform, kRandom, kZipf };
// Where alltoallv's counts come from (issue 13): host arrays (rmaccAlltoAllv); device arrays
// that the caller copies to the host after synchronising the stream, as frameworks do today
// (sync); device arrays the call reads itself (rmaccAlltoAllvDynamic, device); device arrays
// that travel with the data, in slots of a fixed capacity (rmaccAlltoAllvPadded, padded).
enum class CountsSource { kHost, kSync, kDevice, kPadded };

struct Options {
  std::string test;                // putsignal | alltoall | alltoallv
  size_t minBytes = 32 * 1024 * 1024;
  size_t maxBytes = 32 * 1024 * 1024;
  double factor = 0;               // -f; 0 means "use stepBytes" (nccl-tests -i)
  size_t stepBytes = 1024 * 1024;  // -i
  int iters = 20;                  // -n
  int warmup = 5;                  // -w
  int check = 1;                   // -c
  rmaccDataType_t dtype = rmaccFloat32;  // -d
  int registered = 1;              // -m: buffers from rmaccMemAlloc, registered as windows
  bool hostWindow = false;         // --window host: putsignal's target window in host memory
  std::string jsonPath;            // -j
  Pattern pattern = Pattern::kUniform;
  uint64_t seed = 1;
  double zipfS = 1.0;              // Zipf exponent of the expert popularity
  int expertsPerRank = 4;
  std::string peerMode = "half";   // putsignal: half (r + n/2) or xor (r ^ 1)
  bool printCounts = false;        // print the count matrices and exit (no communicator)
  int nranksOverride = 0;          // --nranks, for --print-counts without a launcher
  CountsSource counts = CountsSource::kHost;  // --counts
  bool proxyCpu = false;           // --proxy-cpu: report the proxy thread's CPU share (issue 15)
  bool hostCpu = false;            // --host-cpu: host CPU per call, and the caller's part (issue 49)
  bool graph = false;              // --graph: time replays of each size's call captured once
};

// Parses argv; on a bad flag prints the reason and the usage to stderr and exits 2.
Options parseOptions(int argc, char** argv);
void printUsage(const char* prog);

// "64M" -> 67108864; accepts K, M, G (powers of 1024), optional trailing B. Returns false when
// malformed.
bool parseBytes(const std::string& text, size_t* bytes);

// Datatypes by nccl-tests names (float, half, bfloat16, int8, int32, ...).
bool parseDataType(const std::string& name, rmaccDataType_t* type);
const char* dataTypeName(rmaccDataType_t type);
size_t dataTypeSize(rmaccDataType_t type);
const char* patternName(Pattern p);
const char* countsSourceName(CountsSource c);

// The sizes of the sweep: minBytes, then *factor (or +stepBytes) while <= maxBytes.
std::vector<size_t> sweepSizes(const Options& opts);

}  // namespace rmacc::perf
