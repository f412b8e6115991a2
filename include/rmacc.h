/**
 * @file rmacc.h
 * rmacc: RMA collectives for GPU clusters. Public C API.
 *
 * Conventions follow NCCL's.
 *
 * - Results. Every call returns an rmaccResult_t. After a failure, rmaccGetLastError says why
 *   (naming the argument, the peer or the call). The codes mean:
 *   - rmaccInvalidArgument: this rank's arguments are wrong (NULL, out of range, a handle that
 *     is not live, a buffer that runs past its rmaccMemAlloc allocation, a malformed RMACC_*
 *     variable). Nothing was done and the communicator stays usable.
 *   - rmaccInvalidUsage: the call cannot be made in this state, or the ranks disagree (another
 *     rank rejected its arguments of the same collective, counts that do not match between a
 *     sender and a receiver, ranks whose calls are out of order, a call that cannot be
 *     captured). A disagreement fails the call on every rank, and no data moves.
 *   - rmaccRemoteError: a peer died, aborted or sent something inconsistent.
 *     rmaccNetworkError: the network failed. rmaccTimeout: a peer did not answer within
 *     RMACC_TIMEOUT_S seconds (300 by default). These three are fatal. The communicator is
 *     poisoned: every later call on it fails with the first such error (see
 *     rmaccCommGetAsyncError), and all that is left to do is destroy or abort it.
 *   - rmaccSystemError (the OS or out of memory), rmaccUnhandledCudaError (the CUDA runtime or
 *     driver), rmaccInternalError (a bug in rmacc: please report it).
 *
 * - Collective calls. rmaccCommInitRank, rmaccCommWindowRegister, rmaccCommWindowDeregister,
 *   rmaccAlltoAll, rmaccAlltoAllv, rmaccAlltoAllvDynamic, rmaccAlltoAllvPadded and rmaccBarrier
 *   are collective. Every rank of the communicator must make them, in the same order. A rank
 *   that is out of order is told so (rmaccInvalidUsage) rather than hanging. Bad arguments on
 *   one rank fail that call on every rank: rmaccInvalidArgument on the rank whose arguments were
 *   bad, rmaccInvalidUsage on the others. The other calls are local to the calling rank.
 *
 * - Streams. A call that takes a stream enqueues its work on that stream and returns without
 *   waiting for peers. Errors found once the work runs (counts that do not match, a dead peer)
 *   are reported by rmaccStreamSynchronize, and fatal ones also by rmaccCommGetAsyncError. On
 *   the CUDA backend a stream is any cudaStream_t of the communicator's device. On the host
 *   backend it is one made by rmaccStreamCreate, or NULL: a call on the NULL stream returns once
 *   its work is done and reports its own error.
 *
 * - Threads. The calls that take no communicator (rmaccGetErrorString, rmaccGetVersion,
 *   rmaccGetUniqueId, rmaccTypeSize) and rmaccGetLastError may be made from any thread at any
 *   time. A communicator is not for concurrent use (as an NCCL communicator is not): calls on
 *   one communicator must not overlap. If several threads use it, the application serialises
 *   them. There is one exception: rmaccCommAbort may be called from any thread, to release a
 *   call that is blocked on another. Different communicators are independent, but a process has
 *   one backend (the first communicator chooses it).
 *
 * - Memory. Any buffer the backend can address works (malloc, cudaMalloc, PyTorch's allocator).
 *   Memory from rmaccMemAlloc, and cudaMalloc memory that peers of the node can map, takes the
 *   zero-copy path. Other memory is staged. Counts and displacements are in elements of the
 *   datatype.
 */
#ifndef RMACC_H_
#define RMACC_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Version of this header; rmaccGetVersion returns the library's RMACC_VERSION_CODE. */
#define RMACC_MAJOR 0
#define RMACC_MINOR 1
#define RMACC_PATCH 0
#define RMACC_VERSION_CODE (RMACC_MAJOR * 10000 + RMACC_MINOR * 100 + RMACC_PATCH)

/** The rendezvous ticket of one communicator. Rank 0 makes it (rmaccGetUniqueId) and hands
    its bytes to every other rank (MPI_Bcast, a file, torch.distributed...). It names rank 0's
    address and carries a random secret, so that a process without it cannot join. */
#define RMACC_UNIQUE_ID_BYTES 128
typedef struct { char internal[RMACC_UNIQUE_ID_BYTES]; } rmaccUniqueId;
/** A communicator: one rank's handle on a group of ranks (rmaccCommInitRank). */
typedef struct rmaccComm* rmaccComm_t;
/** A registered window: memory that every rank of the communicator can put into. */
typedef struct rmaccWindow* rmaccWindow_t;
typedef void* rmaccStream_t; /* CUDA backend: a cudaStream_t. Host backend: from
                                rmaccStreamCreate, or NULL for a call that returns when done */

/** The result of every call (see the top of this file for what each code means). */
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

/** Element types. They only set the element size: no call does arithmetic on the data. */
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

/** @return A static description of @p result ("unknown result code" for a value that is not
    an rmaccResult_t). Any thread. */
const char* rmaccGetErrorString(rmaccResult_t result);
/** The reason for the last failed call. When @p comm is live: the last failure on it.
    Otherwise (NULL, or destroyed): the last failure on this thread of a call without a usable
    communicator, rmaccCommInitRank included. The text stays valid on this thread until its next
    rmaccGetLastError. Any thread. */
const char* rmaccGetLastError(rmaccComm_t comm); /* human-readable cause, never NULL */
/** Stores RMACC_VERSION_CODE of the library in @p version.
    @return rmaccInvalidArgument when @p version is NULL. Any thread. */
rmaccResult_t rmaccGetVersion(int* version);
/** Makes a fresh id for one communicator. One process calls it per communicator, normally
    rank 0's. It starts that process's rendezvous listener, which serves that communicator's
    init and then exits, so the process must live until every rank has joined.
    @return rmaccInvalidArgument for a NULL @p uniqueId or a malformed RMACC_* variable (the
    environment is checked here, before any thread starts); rmaccSystemError when no address
    can be listened on. Any thread. */
rmaccResult_t rmaccGetUniqueId(rmaccUniqueId* uniqueId);
/** Creates rank @p rank's handle on a communicator of @p nranks ranks. Collective: each rank
    calls it once with the same @p commId and @p nranks, and it returns when every rank has
    joined. The ranks are grouped into nodes by host name (RMACC_HOSTNAME overrides it).
    *comm is NULL after a failure. A rank that fails tells the rendezvous, so the others fail
    too instead of waiting.
    @return rmaccInvalidArgument for a NULL @p comm, @p nranks or @p rank out of range, a
    malformed id or RMACC_* variable; rmaccInvalidUsage when the ranks disagree (on @p nranks,
    or on settings that must be the same everywhere); rmaccTimeout when some rank has not
    joined after RMACC_TIMEOUT_S; rmaccRemoteError when another rank failed its init;
    rmaccSystemError, rmaccNetworkError or rmaccUnhandledCudaError from the set-up itself.
    Thread-safe. */
rmaccResult_t rmaccCommInitRank(rmaccComm_t* comm, int nranks, rmaccUniqueId commId, int rank);
/** Frees this rank's communicator: its streams, windows, rmaccMemAlloc memory and threads. It
    is local: each rank destroys its own, without waiting for the others, and its peers do not
    take its leaving for a failure. Calls still enqueued on its streams run to their end first
    (each bounded by RMACC_TIMEOUT_S); destroy the CUDA graphs that captured its calls before.
    A poisoned communicator is destroyed the same way. The handle is released in every case
    but the refusal below; afterwards @p comm is no longer a handle.
    @return rmaccSuccess when every call on a stream completed or its outcome was already
    reported (the stream was synchronised); otherwise the first such call's error, with
    rmaccGetLastError(NULL) naming each call that did not complete or failed unreported.
    rmaccInvalidUsage, with the handle still valid, while a call on @p comm is in progress on
    another thread: abort it (which releases that call), or wait for the call to return.
    rmaccInvalidArgument when @p comm is NULL or not live (destroyed twice, for example). */
rmaccResult_t rmaccCommDestroy(rmaccComm_t comm);
/** Gives up on the communicator: records rmaccRemoteError ("aborted") as its error, releases
    every wait, exchange and network operation of this rank at once, tells the peers (their
    calls fail within about a second instead of at the timeout), and frees it as
    rmaccCommDestroy does, without waiting for its work. This is the way out after a fatal
    error or a hang: it may be called from any thread, also while another thread is blocked in
    a call on @p comm; that call returns an error, and abort returns once it has left the
    communicator. Afterwards @p comm is no longer a handle.
    @return rmaccInvalidArgument when @p comm is NULL or not live. */
rmaccResult_t rmaccCommAbort(rmaccComm_t comm);
/** Stores the communicator's fatal error in @p asyncError: rmaccSuccess while it is healthy,
    else the first rmaccRemoteError, rmaccNetworkError or rmaccTimeout found by its background
    work (the network proxy, the progress thread, the streams) or by a call. It does not wait.
    @return rmaccInvalidArgument for a NULL or dead @p comm or a NULL @p asyncError. */
rmaccResult_t rmaccCommGetAsyncError(rmaccComm_t comm, rmaccResult_t* asyncError);
/** Stores the number of ranks of the communicator in @p count.
    @return rmaccInvalidArgument for a NULL or dead @p comm or a NULL @p count. */
rmaccResult_t rmaccCommCount(rmaccComm_t comm, int* count);
/** Stores this rank's index in the communicator, in [0, count), in @p rank.
    @return rmaccInvalidArgument for a NULL or dead @p comm or a NULL @p rank. */
rmaccResult_t rmaccCommUserRank(rmaccComm_t comm, int* rank);

/** Creates a stream owned by the communicator. On the host backend, worker threads run its
    work in order, as a CUDA stream does. On the CUDA backend it is a non-blocking cudaStream_t.
    @return rmaccInvalidArgument for a NULL or dead @p comm or a NULL @p stream. */
rmaccResult_t rmaccStreamCreate(rmaccComm_t comm, rmaccStream_t* stream);
/** Waits until every piece of work enqueued on @p stream so far has finished. Then it reports
    the communicator's fatal error, if there is one, or else the first failure of a completed
    collective call that nothing has reported yet (such as a count mismatch, rmaccInvalidUsage).
    A failure is reported once.
    @return rmaccInvalidArgument for a NULL or dead @p comm or a stream this backend does not
    know; otherwise an error of the work, as above. */
rmaccResult_t rmaccStreamSynchronize(rmaccComm_t comm, rmaccStream_t stream);
/** Waits for @p stream's work, then frees the stream.
    @return rmaccInvalidArgument when @p stream was not made by rmaccStreamCreate on @p comm
    (or was destroyed already). */
rmaccResult_t rmaccStreamDestroy(rmaccComm_t comm, rmaccStream_t stream);

/* Device memory, or shared memory on the host backend; peers of the node can map it. */
/** Allocates @p size bytes that the node's other ranks can map: the memory that windows are made
    of, and the zero-copy path of the collectives. It lives until rmaccMemFree or the
    communicator's end. Local.
    @return rmaccInvalidArgument for a NULL or dead @p comm or a NULL @p ptr; the communicator's
    fatal error; rmaccSystemError or rmaccUnhandledCudaError when the allocation fails. */
rmaccResult_t rmaccMemAlloc(rmaccComm_t comm, void** ptr, size_t size);
/** Frees memory from rmaccMemAlloc. A NULL @p ptr does nothing. Free it only once the work that
    uses it has finished and no registered window lies in it.
    @return rmaccInvalidArgument when @p ptr is not a pointer that rmaccMemAlloc returned on
    @p comm. */
rmaccResult_t rmaccMemFree(rmaccComm_t comm, void* ptr);
/* Collective over the communicator: every rank registers (it may pass size 0). */
/** Registers @p size bytes at @p buff as this rank's part of a window, and returns its handle
    in @p win. Every rank passes its own buffer. Once it returns, any rank may put into any
    rank's part (rmaccPutSignal). On a node with several ranks the memory must come from
    rmaccMemAlloc (the node's ranks map it). A rank that no one will put into may pass size 0.
    @return rmaccInvalidArgument on the rank with a bad argument (a NULL @p win, a NULL @p buff
    with @p size > 0, memory that is not rmaccMemAlloc's where it must be, or runs past its
    allocation), rmaccInvalidUsage on the others; rmaccInvalidUsage for calls out of order; the
    fatal errors. */
rmaccResult_t rmaccCommWindowRegister(rmaccComm_t comm, void* buff, size_t size,
                                      rmaccWindow_t* win);
/** Deregisters a window. Collective: every rank passes its handle of the same window, and no
    rank leaves while others may still put into it. The memory itself is not freed.
    @return rmaccInvalidArgument on a rank whose @p win is not registered on @p comm,
    rmaccInvalidUsage on the others; rmaccInvalidUsage for calls out of order; the fatal
    errors. */
rmaccResult_t rmaccCommWindowDeregister(rmaccComm_t comm, rmaccWindow_t win);

/** One-sided put: enqueues on @p stream a copy of @p count elements from @p localbuff into
    @p peer's part of @p peerWin at byte offset @p peerWinOffset. Once the data is there, it
    adds one to the signal (this rank, @p ctx, @p sigIdx) at @p peer. A peer of this node is
    written by the copy engine, a peer of another node through the network. Later work on
    @p stream starts only once @p localbuff may be reused. @p peer may be this rank. Local: only
    the caller calls it, and the peer observes it with rmaccWaitSignal. It cannot be captured in
    a CUDA graph. @p flags must be 0.
    @return rmaccInvalidArgument for an unknown datatype, @p peer, @p ctx or @p sigIdx out of
    range, nonzero @p flags, a NULL @p localbuff with @p count > 0, a source that runs past its
    rmaccMemAlloc allocation, a window that is not registered, a block that does not fit the
    peer's part; rmaccInvalidUsage on a stream being captured; the fatal errors. */
rmaccResult_t rmaccPutSignal(const void* localbuff, size_t count, rmaccDataType_t datatype,
                             int peer, rmaccWindow_t peerWin, size_t peerWinOffset, int sigIdx,
                             int ctx, unsigned int flags, rmaccComm_t comm, rmaccStream_t stream);
/** rmaccPutSignal without data: enqueues on @p stream one increment of the signal (this rank,
    @p ctx, @p sigIdx) at @p peer. Errors as rmaccPutSignal's, for the arguments it has. */
rmaccResult_t rmaccSignal(int peer, int sigIdx, int ctx, unsigned int flags, rmaccComm_t comm,
                          rmaccStream_t stream);
/** One expectation of rmaccWaitSignal: @p opCnt more signals from @p peer on (@p ctx, @p sigIdx). */
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} rmaccWaitSignalDesc_t;
/** Enqueues on @p stream a wait until every descriptor's signal has arrived @p opCnt more times
    than earlier waits of this rank consumed. Signals are counted, never reset, so a signal that
    arrives before its wait is enqueued is not lost. Later work on @p stream, the data of those
    puts included, starts after the wait. Local. It cannot be captured. A signal that never
    comes fails the communicator with rmaccTimeout after RMACC_TIMEOUT_S.
    @return rmaccInvalidArgument for a negative @p nDesc or @p opCnt, a NULL @p signalDescs with
    @p nDesc > 0, a descriptor out of range (in that case no expectation is consumed);
    rmaccInvalidUsage on a stream being captured; the fatal errors. */
rmaccResult_t rmaccWaitSignal(int nDesc, const rmaccWaitSignalDesc_t* signalDescs,
                              rmaccComm_t comm, rmaccStream_t stream);

/** rmaccAlltoAllv with @p count elements to and from every rank: block j of @p sendbuff (at
    element j x count) goes to rank j, and rank i's block lands at element i x count of
    @p recvbuff. Collective, with the same @p count on every rank. Errors as rmaccAlltoAllv's,
    plus rmaccInvalidArgument when count x nranks elements overflow the address space. */
rmaccResult_t rmaccAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                            rmaccDataType_t datatype, rmaccComm_t comm, rmaccStream_t stream);
/** The variable all-to-all: @p sendcounts[j] elements from @p sendbuff + @p sdispls[j] go to
    rank j, and land at its recvbuff + rdispls[me]. Every array has nranks entries, in elements.
    Collective. Each rank passes its own arrays, and rank i's sendcounts[j] must equal rank j's
    recvcounts[i]. Those counts are checked between the ranks when the call runs: a mismatch
    fails the call on every rank with rmaccInvalidUsage (reported by rmaccStreamSynchronize,
    or by the call on the host NULL stream), and nothing is written. Enqueued on @p stream. The
    call returns once its work is enqueued, or after a short bounded wait for late peers (the
    work is then enqueued later). It can be captured in a CUDA graph (see rmaccAlltoAllvDynamic). The buffers must stay
    valid until @p stream passes the call.
    @return rmaccInvalidArgument on the rank with a bad argument (an unknown datatype, a NULL
    array, a NULL buffer with a nonzero count, a block that runs past its rmaccMemAlloc
    allocation, overlapping receive blocks, sizes that overflow), rmaccInvalidUsage on the
    others; rmaccInvalidUsage for calls out of order; the fatal errors. */
rmaccResult_t rmaccAlltoAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                             void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
                             rmaccDataType_t datatype, rmaccComm_t comm, rmaccStream_t stream);
/** Enqueues on @p stream a barrier over every rank of the communicator: work after it on
    @p stream starts only once every rank's stream has reached its barrier. Collective. It
    cannot be captured. A rank that cannot join (a bad stream) fails the communicator, so that
    the others fail at once instead of at the timeout.
    @return rmaccInvalidArgument for a stream this backend does not know; rmaccInvalidUsage on
    a stream being captured; the fatal errors. */
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
   most 8 replays ahead of the device (docs/usage.md, CUDA graphs). A fixed-count call
   captured on a one-node communicator is recorded whole instead (copies and flags, nothing at replay, no
   such limit). Puts, signals, waits and barriers cannot be captured (rmaccInvalidUsage). */
/** Collective, as rmaccAlltoAllv, with the pointers to the counts only known to the stream.
    @return rmaccInvalidArgument on the rank with a bad argument found when the call is made
    (an unknown datatype, a NULL array, a NULL @p recvbuff with @p recvcapacity > 0, a capacity
    that overflows or runs past its rmaccMemAlloc allocation), rmaccInvalidUsage on the others;
    errors found once the counts are read (a mismatch, an overflow of @p recvcapacity) come
    through rmaccStreamSynchronize as rmaccInvalidUsage. */
rmaccResult_t rmaccAlltoAllvDynamic(const void* sendbuff, const size_t* sendcounts,
                                    const size_t* sdispls, void* recvbuff, size_t recvcapacity,
                                    size_t* recvcounts, size_t* rdispls,
                                    rmaccDataType_t datatype, rmaccComm_t comm,
                                    rmaccStream_t stream);

/* Extensions (not in the original contract). */

/* Padded all-to-all with counts on the device (docs/padded-alltoallv-design.md): the layout
   is fixed, so the call needs no counts on the host, ever. @p sendbuff and @p recvbuff hold
   nranks slots of @p capacity elements each. Slot j of sendbuff (at element j x capacity) goes
   whole to rank j, where it lands in slot me (at element me x capacity) of its recvbuff; the
   8-byte word sendcounts[j] goes with it, to rank j's recvcounts[me]. The receiver reads
   recvcounts[i] and the first recvcounts[i] rows of slot i in place, once @p stream passed the
   call. Rows past the count are copied too (whatever sendbuff holds there): the call always
   moves nranks x capacity x elementsize bytes out of each rank, at every occupancy. At mean
   occupancy f (sum of counts / (nranks x capacity)) it moves 1/f times the bytes of the packed
   rmaccAlltoAllvDynamic, and saves that call's count trade on the host: use it for small calls
   (decode-sized MoE dispatch, where the fixed cost dominates), the packed call once
   (1 - f) x nranks x capacity x elementsize bytes take longer to copy than the fixed cost saved
   (the design note gives the crossover; measure it with rmacc-perf alltoallv --counts padded).

   Captured in a CUDA graph on a one-node communicator, with the buffers and both count arrays
   in memory the node's ranks can map (rmaccMemAlloc, cudaMalloc), the whole call is in the
   graph: copies and stream memory operations, no kernel and no host function, nothing for the
   CPU at replay, and replays may be launched back to back without limit. Across nodes (or with
   memory the peers cannot map) a captured call is run by rmacc's progress thread at each replay,
   as a captured rmaccAlltoAllv is; a replay then holds two such calls (the slots, the counts):
   launch at most 4 replays ahead of the device. */
/** Collective: every rank passes the same @p capacity and @p datatype, in the same call order
    as its other collective calls. @p sendcounts and @p recvcounts are nranks 64-bit words in
    device memory (host memory on the host backend), read and written only by the stream; the
    counts never reach the CPU on the data path. @p recvcounts must not overlap @p recvbuff;
    the stream sets it to zeros first, so a call that fails leaves zeros there.
    A count above @p capacity is never truncated silently: exactly @p capacity rows move
    whatever the count says (nothing is written outside the slots), the count word arrives as
    sent, and the communicator fails with rmaccInvalidUsage ("rank i sent N rows to rank j, more
    than capacity C"), seen by rmaccStreamSynchronize and rmaccCommGetAsyncError at the latest
    (both check the counts of the calls their stream or communicator completed); every rank's
    communicator then fails (rmaccRemoteError on the others). For a graph replayed many times
    between two checks, a background check every 20 ms sees the counts of the replay that ran
    last (a bad replay followed by good ones before the check may be missed: check recvcounts
    yourself where that matters). Calls on one communicator from one thread at a time, as for
    every collective.
    @return rmaccInvalidArgument on the rank with a bad argument (an unknown datatype, a NULL
    count array, a NULL buffer with @p capacity > 0, sizes that overflow, a buffer or count
    array that runs past its rmaccMemAlloc allocation, @p recvcounts inside @p recvbuff),
    rmaccInvalidUsage on the others; rmaccInvalidUsage for calls out of order; the fatal
    errors. */
rmaccResult_t rmaccAlltoAllvPadded(const void* sendbuff, const size_t* sendcounts,
                                   size_t capacity, void* recvbuff, size_t* recvcounts,
                                   rmaccDataType_t datatype, rmaccComm_t comm,
                                   rmaccStream_t stream);

/* Size in bytes of one element of a datatype, 0 for an unknown one. */
/** Any thread; never fails. */
size_t rmaccTypeSize(rmaccDataType_t datatype);
/* Number of ranks of the caller's node and its index among them (DESIGN.md §1). */
/** Also the caller's node index and the number of nodes. Each output may be NULL, in which case
    it is skipped. Nodes are numbered in order of their lowest rank.
    @return rmaccInvalidArgument for a NULL or dead @p comm. */
rmaccResult_t rmaccCommLocalInfo(rmaccComm_t comm, int* localRank, int* localSize, int* node,
                                 int* nNodes);

#ifdef __cplusplus
}
#endif

#endif /* RMACC_H_ */
