// mpi-alltoallv: the MPI_Alltoallv baseline for `rmacc-perf alltoallv`. Same flags, same count
// matrices and gapped layouts (counts.h), same data check and same table (table.h), host
// buffers. Usage:
//   mpirun -np 4 build/lab/mpi-alltoallv -b 1K -e 64M -f 4 --pattern zipf
#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "check.h"
#include "counts.h"
#include "options.h"
#include "table.h"

using namespace rmacc::perf;

namespace {

// The test name is implied; append it so the shared parser sees the usual form.
Options parse(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  bool named = false;
  for (int i = 1; i < argc; ++i) named |= strcmp(argv[i], "alltoallv") == 0;
  static char kName[] = "alltoallv";
  if (!named) args.push_back(kName);
  return parseOptions(static_cast<int>(args.size()), args.data());
}

// A type of the element's size: MPI only copies, so the bits are all that matter.
MPI_Datatype mpiType(size_t elemSize) {
  switch (elemSize) {
    case 1: return MPI_UINT8_T;
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    default: return MPI_UINT64_T;
  }
}

// MPI_Alltoallv takes int counts and displacements: refuse, loudly, what does not fit.
std::vector<int> toInt(const std::vector<size_t>& v) {
  std::vector<int> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] > static_cast<size_t>(INT_MAX)) {
      fprintf(stderr, "mpi-alltoallv: count or displacement %zu exceeds INT_MAX\n", v[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    out[i] = static_cast<int>(v[i]);
  }
  return out;
}

struct IntLayout {
  std::vector<int> sc, sd, rc, rd;
};

double timeCalls(int warmup, int iters, const std::vector<uint8_t>& send, std::vector<uint8_t>& recv,
                 const IntLayout& l, MPI_Datatype type) {
  auto one = [&] {
    MPI_Alltoallv(send.data(), l.sc.data(), l.sd.data(), type, recv.data(), l.rc.data(), l.rd.data(), type,
                  MPI_COMM_WORLD);
  };
  for (int i = 0; i < warmup; ++i) one();
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i) one();
  double us = (MPI_Wtime() - t0) * 1e6 / iters, maxUs = 0;
  MPI_Allreduce(&us, &maxUs, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return maxUs;
}

int countNodes() {
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int localRank = 0, leaders = 0;
  MPI_Comm_rank(local, &localRank);
  int leader = localRank == 0;
  MPI_Allreduce(&leader, &leaders, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Comm_free(&local);
  return leaders;
}

void printHeader(const Options& opts, int nranks, int nodes) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = "";
  int len = 0;
  MPI_Get_library_version(version, &len);
  if (char* nl = strchr(version, '\n')) *nl = '\0';
  printf("# mpi-alltoallv: %s\n# nranks %d, nodes %d, host buffers\n", version, nranks, nodes);
  printf("# %s\n", describePattern(opts).c_str());
  printf("#  minBytes %zu maxBytes %zu warmup iters: %d iters: %d validation: %d\n", opts.minBytes, opts.maxBytes,
         opts.warmup, opts.iters, opts.check);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Options opts = parse(argc, argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  int nodes = countNodes();
  const size_t es = dataTypeSize(opts.dtype);
  const MPI_Datatype type = mpiType(es);
  std::string tags = "\"test\":\"mpi-alltoallv\",\"nranks\":" + std::to_string(nranks) + ",\"nodes\":" +
                     std::to_string(nodes) + ",\"pattern\":" + jsonString(patternName(opts.pattern)) +
                     ",\"seed\":" + std::to_string(opts.seed);
  Table table(stdout, rank == 0 ? opts.jsonPath : "", tags);
  if (rank == 0) {
    printHeader(opts, nranks, nodes);
    table.header();
  }
  for (size_t bytes : sweepSizes(opts)) {
    Layout l = alltoallvLayout(opts, nranks, rank, bytes);
    IntLayout il{toInt(l.sendCounts), toInt(l.sdispls), toInt(l.recvCounts), toInt(l.rdispls)};
    std::vector<uint8_t> send(l.sendElems * es), recv(l.recvElems * es);
    if (opts.check) {
      fillSend(send.data(), l, rank, es);
      poison(recv.data(), l.recvElems, es);
    }
    double us = timeCalls(opts.warmup, opts.iters, send, recv, il, type);
    long long wrong = -1;
    if (opts.check) {
      long long mine = static_cast<long long>(verifyRecv(recv.data(), l, rank, es));
      MPI_Allreduce(&mine, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    }
    size_t count = std::accumulate(l.sendCounts.begin(), l.sendCounts.end(), size_t{0});
    if (rank == 0) table.row(makeRow(count * es, count, us, static_cast<double>(nranks - 1) / nranks, wrong), opts.dtype);
  }
  long long wrong = rank == 0 ? table.footer() : 0;
  MPI_Bcast(&wrong, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return wrong ? 1 : 0;
}
