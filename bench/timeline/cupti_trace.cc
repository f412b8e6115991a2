// A CUPTI activity tracer loaded into any CUDA program through the driver's injection hook:
//
//   CUDA_INJECTION64_PATH=/path/librmacc-cupti-trace.so CUPTI_TRACE_DIR=out/ PROGRAM ...
//
// The driver calls InitializeInjection at cuInit. Every process writes out/trace-<pid>.jsonl:
// one JSON object a line, for each driver and runtime API call (thread id, start, end), each
// copy, memset, kernel and synchronisation on the GPU (start, end, stream, and the correlation
// id of the API call that issued it), the names of the process's threads, and a header with
// the process's command line and launcher rank. bench/timeline/cupti_timeline.py reads them.
//
// It knows nothing of the program it traces. libcupti is opened at run time (CUPTI_TRACE_LIB,
// else the loader's search path) so that the one from a pip wheel works; its records must have
// the layout of the cupti.h this was built with (same CUPTI major version: checked).
// CUPTI_TRACE_GRAPH=1 records whole-graph launches instead of their nodes (CUPTI gives one or
// the other).
#include <cupti.h>
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>

namespace {

// The CUPTI entry points used, resolved from the library opened at run time.
struct Cupti {
  decltype(&cuptiActivityRegisterCallbacks) registerCallbacks;
  decltype(&cuptiActivityEnable) enable;
  decltype(&cuptiActivityFlushAll) flushAll;
  decltype(&cuptiActivityGetNextRecord) nextRecord;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped;
  decltype(&cuptiGetCallbackName) callbackName;
  decltype(&cuptiGetVersion) version;
  decltype(&cuptiGetResultString) resultString;
  decltype(&cuptiSetThreadIdType) setThreadIdType;
};

Cupti api;
FILE* out = nullptr;
pthread_mutex_t outLock = PTHREAD_MUTEX_INITIALIZER;
std::map<uint64_t, std::string> apiNames;  // (domain << 32 | cbid) -> name; under outLock
std::set<int> namedThreads;                 // threads whose name is written; under outLock
constexpr size_t kBufferBytes = 8 << 20;

template <typename F>
bool resolve(void* lib, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!*fn) fprintf(stderr, "cupti-trace: %s not in libcupti\n", name);
  return *fn != nullptr;
}

bool openCupti() {
  const char* env = getenv("CUPTI_TRACE_LIB");
  void* lib = nullptr;
  for (const char* name : {env, "libcupti.so.13", "libcupti.so"}) {
    if (name && *name && (lib = dlopen(name, RTLD_NOW | RTLD_GLOBAL))) break;
  }
  if (!lib) {
    fprintf(stderr, "cupti-trace: cannot open libcupti (set CUPTI_TRACE_LIB): %s\n", dlerror());
    return false;
  }
  return resolve(lib, "cuptiActivityRegisterCallbacks", &api.registerCallbacks) &&
         resolve(lib, "cuptiActivityEnable", &api.enable) &&
         resolve(lib, "cuptiActivityFlushAll", &api.flushAll) &&
         resolve(lib, "cuptiActivityGetNextRecord", &api.nextRecord) &&
         resolve(lib, "cuptiActivityGetNumDroppedRecords", &api.dropped) &&
         resolve(lib, "cuptiGetCallbackName", &api.callbackName) &&
         resolve(lib, "cuptiGetVersion", &api.version) &&
         resolve(lib, "cuptiGetResultString", &api.resultString) &&
         resolve(lib, "cuptiSetThreadIdType", &api.setThreadIdType);
}

// A JSON string body: kernel names and command lines may hold quotes or backslashes.
std::string jsonText(const char* s) {
  std::string r;
  for (; s && *s; ++s) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') r += '\\', r += (char)c;
    else if (c < 0x20) { char b[8]; snprintf(b, sizeof b, "\\u%04x", c); r += b; }
    else r += (char)c;
  }
  return r;
}

const std::string& apiName(CUpti_CallbackDomain domain, uint32_t cbid) {
  const uint64_t key = (uint64_t)domain << 32 | cbid;
  auto it = apiNames.find(key);
  if (it != apiNames.end()) return it->second;
  const char* name = nullptr;
  if (api.callbackName(domain, cbid, &name) != CUPTI_SUCCESS || !name) name = "?";
  return apiNames[key] = name;
}

// The names of the process's threads alive now (caller, library threads, CUPTI's own).
void writeThreadNames() {
  DIR* d = opendir("/proc/self/task");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    const int tid = atoi(e->d_name);
    if (tid <= 0 || namedThreads.count(tid)) continue;
    char path[64], name[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
    if (FILE* f = fopen(path, "r")) {
      if (fgets(name, sizeof name, f)) name[strcspn(name, "\n")] = 0;
      fclose(f);
    }
    namedThreads.insert(tid);
    fprintf(out, "{\"k\":\"thread\",\"tid\":%d,\"name\":\"%s\"}\n", tid, jsonText(name).c_str());
  }
  closedir(d);
}

void writeRecord(CUpti_Activity* rec) {
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_DRIVER:
    case CUPTI_ACTIVITY_KIND_RUNTIME: {
      auto* a = reinterpret_cast<CUpti_ActivityAPI*>(rec);
      const bool drv = rec->kind == CUPTI_ACTIVITY_KIND_DRIVER;
      fprintf(out, "{\"k\":\"api\",\"d\":\"%s\",\"name\":\"%s\",\"tid\":%u,\"start\":%llu,\"end\":%llu,\"corr\":%u,\"ret\":%u}\n",
              drv ? "drv" : "rt",
              apiName(drv ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid).c_str(),
              a->threadId, (unsigned long long)a->start, (unsigned long long)a->end, a->correlationId,
              a->returnValue);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(rec);
      fprintf(out, "{\"k\":\"memcpy\",\"copy\":%u,\"bytes\":%llu,\"start\":%llu,\"end\":%llu,\"dev\":%u,\"stream\":%u,\"corr\":%u,\"graph\":%u}\n",
              m->copyKind, (unsigned long long)m->bytes, (unsigned long long)m->start,
              (unsigned long long)m->end, m->deviceId, m->streamId, m->correlationId, m->graphId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
      auto* m = reinterpret_cast<CUpti_ActivityMemcpyPtoP4*>(rec);
      fprintf(out, "{\"k\":\"memcpy\",\"copy\":%u,\"bytes\":%llu,\"start\":%llu,\"end\":%llu,\"dev\":%u,\"stream\":%u,\"corr\":%u,\"graph\":%u,\"p2p\":1}\n",
              m->copyKind, (unsigned long long)m->bytes, (unsigned long long)m->start,
              (unsigned long long)m->end, m->deviceId, m->streamId, m->correlationId, m->graphId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(rec);
      fprintf(out, "{\"k\":\"memset\",\"bytes\":%llu,\"start\":%llu,\"end\":%llu,\"dev\":%u,\"stream\":%u,\"corr\":%u,\"graph\":%u}\n",
              (unsigned long long)m->bytes, (unsigned long long)m->start, (unsigned long long)m->end,
              m->deviceId, m->streamId, m->correlationId, m->graphId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      auto* kr = reinterpret_cast<CUpti_ActivityKernel10*>(rec);
      fprintf(out, "{\"k\":\"kernel\",\"name\":\"%s\",\"start\":%llu,\"end\":%llu,\"dev\":%u,\"stream\":%u,\"corr\":%u,\"graph\":%u}\n",
              jsonText(kr->name).c_str(), (unsigned long long)kr->start, (unsigned long long)kr->end,
              kr->deviceId, kr->streamId, kr->correlationId, kr->graphId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      auto* s = reinterpret_cast<CUpti_ActivitySynchronization2*>(rec);
      fprintf(out, "{\"k\":\"sync\",\"type\":%u,\"start\":%llu,\"end\":%llu,\"stream\":%u,\"corr\":%u}\n",
              (unsigned)s->type, (unsigned long long)s->start, (unsigned long long)s->end,
              s->streamId, s->correlationId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_GRAPH_TRACE: {
      auto* g = reinterpret_cast<CUpti_ActivityGraphTrace2*>(rec);
      fprintf(out, "{\"k\":\"graph\",\"graph\":%u,\"start\":%llu,\"end\":%llu,\"dev\":%u,\"stream\":%u,\"corr\":%u}\n",
              g->graphId, (unsigned long long)g->start, (unsigned long long)g->end, g->deviceId,
              g->streamId, g->correlationId);
      break;
    }
    default:
      break;
  }
}

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* maxRecords) {
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *maxRecords = 0;
}

void CUPTIAPI bufferCompleted(CUcontext ctx, uint32_t streamId, uint8_t* buffer, size_t,
                              size_t valid) {
  pthread_mutex_lock(&outLock);
  CUpti_Activity* rec = nullptr;
  while (api.nextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) writeRecord(rec);
  size_t dropped = 0;
  if (api.dropped(ctx, streamId, &dropped) == CUPTI_SUCCESS && dropped)
    fprintf(out, "{\"k\":\"dropped\",\"n\":%zu}\n", dropped);
  writeThreadNames();  // library threads are alive now; at exit they may be gone
  pthread_mutex_unlock(&outLock);
  free(buffer);
}

void atExit() {
  api.flushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  pthread_mutex_lock(&outLock);
  fflush(out);
  pthread_mutex_unlock(&outLock);
}

void writeHeader() {
  std::string cmd;
  if (FILE* f = fopen("/proc/self/cmdline", "r")) {
    int c;
    while ((c = fgetc(f)) != EOF) cmd += c ? (char)c : ' ';
    fclose(f);
  }
  // A launcher's rank, where one set it (rmacc-run, torchrun, Open MPI, Slurm).
  const char* rank = nullptr;
  for (const char* v : {"RMACC_RUN_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"})
    if (!rank && getenv(v)) rank = getenv(v);
  fprintf(out, "{\"k\":\"process\",\"pid\":%d,\"rank\":%s,\"cmd\":\"%s\"}\n", (int)getpid(),
          rank ? rank : "null", jsonText(cmd.c_str()).c_str());
}

bool enable(CUpti_ActivityKind kind, bool required) {
  CUptiResult r = api.enable(kind);
  if (r == CUPTI_SUCCESS) return true;
  const char* text = "?";
  api.resultString(r, &text);
  if (required) fprintf(stderr, "cupti-trace: activity kind %d: %s\n", (int)kind, text);
  return false;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  static bool done = false;
  if (done) return 1;
  done = true;
  if (!openCupti()) return 0;
  uint32_t version = 0;
  api.version(&version);
  if (version / 1000 != CUPTI_API_VERSION / 1000)
    fprintf(stderr, "cupti-trace: libcupti API version %u, built against %u: records may not parse\n",
            version, (unsigned)CUPTI_API_VERSION);
  const char* dir = getenv("CUPTI_TRACE_DIR");
  std::string path = std::string(dir && *dir ? dir : ".") + "/trace-" + std::to_string(getpid()) + ".jsonl";
  out = fopen(path.c_str(), "w");
  if (!out) {
    fprintf(stderr, "cupti-trace: cannot write %s\n", path.c_str());
    return 0;
  }
  writeHeader();
  api.setThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);  // gettid(), as /proc names them
  api.registerCallbacks(bufferRequested, bufferCompleted);
  enable(CUPTI_ACTIVITY_KIND_DRIVER, true);
  enable(CUPTI_ACTIVITY_KIND_RUNTIME, true);
  enable(CUPTI_ACTIVITY_KIND_MEMCPY, true);
  enable(CUPTI_ACTIVITY_KIND_MEMCPY2, false);
  enable(CUPTI_ACTIVITY_KIND_MEMSET, true);
  enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, true);
  enable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, false);
  const char* graph = getenv("CUPTI_TRACE_GRAPH");
  if (graph && atoi(graph)) enable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE, true);
  atexit(atExit);
  return 1;
}
