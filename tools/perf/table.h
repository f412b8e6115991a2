// The nccl-tests table: `size count type | time(us) algbw(GB/s) busbw(GB/s) #wrong`, then the
// "# Avg bus bandwidth" footer, plus optional JSON lines. Only rank 0 prints (the caller
// decides); rmacc-perf and mpi-alltoallv share it so their numbers read the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "options.h"

namespace rmacc::perf {

struct Row {
  size_t bytes = 0;        // per-rank send bytes of one call
  size_t count = 0;        // elements (per rank)
  double timeUs = 0;       // max over ranks of the mean time per call
  double algbw = 0;        // GB/s = bytes / time
  double busbw = 0;        // GB/s, algbw scaled by the collective's factor
  int64_t wrong = -1;      // summed over ranks; -1 when not checked
};

// algbw and busbw for `bytes` moved in `timeUs`; busFactor is (n-1)/n for alltoall(v), 1 for p2p.
Row makeRow(size_t bytes, size_t count, double timeUs, double busFactor, int64_t wrong);

class Table {
 public:
  // `json` may be empty (no JSON lines). `tags` is a JSON fragment (without braces) added to
  // every line, e.g. "\"test\":\"alltoallv\",\"nranks\":4".
  Table(FILE* out, const std::string& jsonPath, std::string tags);
  ~Table();
  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;

  void header() const;
  void row(const Row& r, rmaccDataType_t type);
  // Prints the wrong-value summary and "# Avg bus bandwidth"; returns the total wrong count.
  int64_t footer() const;

 private:
  FILE* out_;
  FILE* json_ = nullptr;
  std::string tags_;
  double busbwSum_ = 0;
  int rows_ = 0;
  int64_t wrong_ = 0;
  bool checked_ = false;
};

// Escapes a string for inclusion in a JSON document ("..." added).
std::string jsonString(const std::string& s);

}  // namespace rmacc::perf
