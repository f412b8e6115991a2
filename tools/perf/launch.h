// Who started this process, and how it gets the communicator's unique id:
//  rmacc-run: RMACC_RUN_RANK/NRANKS/LOCAL_RANK, the id hex-encoded in RMACC_RUN_ID;
//  mpirun (Open MPI): OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK;
//  torchrun: RANK/WORLD_SIZE/LOCAL_RANK;
//  otherwise a single rank.
// Under mpirun and torchrun rank 0 makes the id and shares it through a file in $TMPDIR named
// after the job (so all ranks must see the same $TMPDIR: one machine, or a shared directory).
#pragma once

#include <string>

#include "rmacc.h"

namespace rmacc::perf {

struct Launch {
  std::string launcher = "single";  // rmacc-run | mpirun | torchrun | single
  int rank = 0;
  int nranks = 1;
  int localRank = 0;
  std::string idHex;   // rmacc-run only
  std::string idFile;  // mpirun / torchrun: the rendezvous file
};

// Reads the environment; exits with a message when the variables are inconsistent.
Launch detectLaunch();

// The unique id for this job: decoded from RMACC_RUN_ID, made here (single rank), or exchanged
// through Launch::idFile (rank 0 writes a temp file and renames it; the others poll for it).
// Call before rmaccCommInitRank; call removeIdFile after it returned on rank 0.
rmaccUniqueId obtainUniqueId(const Launch& launch);
void removeIdFile(const Launch& launch);

// Shares `bytes` bytes of rank 0 with every rank without a communicator (another library's
// unique id, e.g. NCCL's): rank 0 writes them to a file named after the job and `tag`, the
// others poll for it, as for the id above (rmacc-run's jobs too: one machine or a shared
// $TMPDIR). Rank 0 removes the file with removeSharedFile once every rank has read it.
void shareFromRank0(const Launch& launch, const std::string& tag, void* blob, size_t bytes);
void removeSharedFile(const Launch& launch, const std::string& tag);

}  // namespace rmacc::perf
