/*
 * rmacc: RMA collectives for GPU clusters. Public C API.
 *
 * Conventions follow NCCL: every call returns rmaccResult_t; a communicator is created
 * collectively from a unique id that rank 0 makes and hands to the others; calls taking a
 * stream enqueue work and return without waiting for peers.
 */
#ifndef RMACC_H_
#define RMACC_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RMACC_MAJOR 0
#define RMACC_MINOR 1
#define RMACC_PATCH 0
#define RMACC_VERSION_CODE (RMACC_MAJOR * 10000 + RMACC_MINOR * 100 + RMACC_PATCH)

#define RMACC_UNIQUE_ID_BYTES 128
typedef struct { char internal[RMACC_UNIQUE_ID_BYTES]; } rmaccUniqueId;
typedef struct rmaccComm* rmaccComm_t;
typedef struct rmaccWindow* rmaccWindow_t;
typedef void* rmaccStream_t; /* CUDA backend: a cudaStream_t. Host backend: from
                                rmaccStreamCreate, or NULL for a call that returns when done */

typedef enum {
  rmaccSuccess = 0,
  rmaccUnhandledCudaError = 1,
  rmaccSystemError = 2,
  rmaccInternalError = 3,
  rmaccInvalidArgument = 4,
  rmaccInvalidUsage = 5,
  rmaccRemoteError = 6,
  rmaccInProgress = 7,
  rmaccTimeout = 8,
  rmaccNetworkError = 9,
  rmaccNumResults = 10
} rmaccResult_t;

typedef enum {
  rmaccInt8,
  rmaccUint8,
  rmaccInt32,
  rmaccUint32,
  rmaccInt64,
  rmaccUint64,
  rmaccFloat16,
  rmaccFloat32,
  rmaccFloat64,
  rmaccBfloat16,
  rmaccNumTypes
} rmaccDataType_t;

/* Limits of the signal space: ctx in [0, RMACC_MAX_CONTEXTS), sigIdx in [0, RMACC_MAX_SIGNALS). */
#define RMACC_MAX_CONTEXTS 4
#define RMACC_MAX_SIGNALS 8

const char* rmaccGetErrorString(rmaccResult_t result);
const char* rmaccGetLastError(rmaccComm_t comm); /* human-readable cause, never NULL */
rmaccResult_t rmaccGetVersion(int* version);
rmaccResult_t rmaccGetUniqueId(rmaccUniqueId* uniqueId);
rmaccResult_t rmaccCommInitRank(rmaccComm_t* comm, int nranks, rmaccUniqueId commId, int rank);
/* Ends the communicator after every call enqueued on it ran to its end (each bounded by
 * RMACC_TIMEOUT_S). Returns rmaccSuccess when every call on a stream completed or its outcome
 * was already reported (the stream was synchronised); otherwise the first such call's error,
 * with rmaccGetLastError(NULL) naming each call that did not complete or failed unreported.
 * The handle is released in both cases. While a call on this communicator is in progress on
 * another thread, destroy is refused with rmaccInvalidUsage and the handle stays valid: abort
 * it (which releases that call), or wait for the call to return. A handle already destroyed
 * or aborted gives rmaccInvalidArgument. */
rmaccResult_t rmaccCommDestroy(rmaccComm_t comm);
/* Ends the communicator without waiting for its work: every wait, exchange and network
 * operation fails at once (peers see this rank abort). Safe from any thread, also while
 * another thread is blocked in a call on it (the way out of a hung call): that call returns an
 * error, and abort returns once it has left the communicator. Releases the handle; a second
 * destroy or abort gives rmaccInvalidArgument. */
rmaccResult_t rmaccCommAbort(rmaccComm_t comm);
rmaccResult_t rmaccCommGetAsyncError(rmaccComm_t comm, rmaccResult_t* asyncError);
rmaccResult_t rmaccCommCount(rmaccComm_t comm, int* count);
rmaccResult_t rmaccCommUserRank(rmaccComm_t comm, int* rank);

rmaccResult_t rmaccStreamCreate(rmaccComm_t comm, rmaccStream_t* stream);
rmaccResult_t rmaccStreamSynchronize(rmaccComm_t comm, rmaccStream_t stream);
rmaccResult_t rmaccStreamDestroy(rmaccComm_t comm, rmaccStream_t stream);

/* Device memory, or shared memory on the host backend; peers of the node can map it. */
rmaccResult_t rmaccMemAlloc(rmaccComm_t comm, void** ptr, size_t size);
rmaccResult_t rmaccMemFree(rmaccComm_t comm, void* ptr);
/* Collective over the communicator: every rank registers (it may pass size 0). */
rmaccResult_t rmaccCommWindowRegister(rmaccComm_t comm, void* buff, size_t size,
                                      rmaccWindow_t* win);
rmaccResult_t rmaccCommWindowDeregister(rmaccComm_t comm, rmaccWindow_t win);

rmaccResult_t rmaccPutSignal(const void* localbuff, size_t count, rmaccDataType_t datatype,
                             int peer, rmaccWindow_t peerWin, size_t peerWinOffset, int sigIdx,
                             int ctx, unsigned int flags, rmaccComm_t comm, rmaccStream_t stream);
rmaccResult_t rmaccSignal(int peer, int sigIdx, int ctx, unsigned int flags, rmaccComm_t comm,
                          rmaccStream_t stream);
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} rmaccWaitSignalDesc_t;
rmaccResult_t rmaccWaitSignal(int nDesc, const rmaccWaitSignalDesc_t* signalDescs,
                              rmaccComm_t comm, rmaccStream_t stream);

rmaccResult_t rmaccAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                            rmaccDataType_t datatype, rmaccComm_t comm, rmaccStream_t stream);
rmaccResult_t rmaccAlltoAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                             void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
                             rmaccDataType_t datatype, rmaccComm_t comm, rmaccStream_t stream);
rmaccResult_t rmaccBarrier(rmaccComm_t comm, rmaccStream_t stream);

/* Counts on the device (CUDA backend; host pointers on the host backend), read when the stream
   reaches the call: sendcounts[] and sdispls[] (nranks each, elements). Received blocks are
   packed into recvbuff in source-rank order; recvcounts[] and rdispls[] (nranks each) are written
   before later work on the stream runs. Blocks that would not fit in recvcapacity elements:
   nothing is written past it, every rank's call fails with rmaccInvalidUsage (through
   rmaccCommGetAsyncError / rmaccStreamSynchronize) and recvcounts says what would have arrived.
   (DESIGN.md 4.1.) Capturable in a CUDA graph, as rmaccAlltoAll and rmaccAlltoAllv are: the
   graph holds stream memory operations, copies and a host function (no kernel), and each replay
   reads the counts anew and runs as a new call, numbered when its stream reaches it. While a
   graph holding a communicator's calls exists, that communicator's other collective calls on
   streams are numbered the same way, so replays and uncaptured calls on one stream keep their
   stream order; every rank must make its calls, replays included, in the same order. A
   replay's work is enqueued by rmacc's progress thread when the stream reaches it: launch at
   most 8 replays ahead of the device (README, CUDA graphs). A fixed-count call captured on a
   one-node communicator is recorded whole instead (copies and flags, nothing at replay, no
   such limit). Puts, signals, waits and barriers cannot be captured (rmaccInvalidUsage). */
rmaccResult_t rmaccAlltoAllvDynamic(const void* sendbuff, const size_t* sendcounts,
                                    const size_t* sdispls, void* recvbuff, size_t recvcapacity,
                                    size_t* recvcounts, size_t* rdispls,
                                    rmaccDataType_t datatype, rmaccComm_t comm,
                                    rmaccStream_t stream);

/* Extensions (not in the original contract). */

/* Size in bytes of one element of a datatype, 0 for an unknown one. */
size_t rmaccTypeSize(rmaccDataType_t datatype);
/* Number of ranks of the caller's node and its index among them (DESIGN.md §1). */
rmaccResult_t rmaccCommLocalInfo(rmaccComm_t comm, int* localRank, int* localSize, int* node,
                                 int* nNodes);

#ifdef __cplusplus
}
#endif

#endif /* RMACC_H_ */
