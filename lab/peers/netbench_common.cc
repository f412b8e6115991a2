#include "netbench_common.h"

#include <getopt.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cerrno>  // program_invocation_short_name
#include <cstdlib>
#include <exception>

namespace netbench {
namespace {

// "8", "64k", "256M", "1G" (binary multiples); 0 for anything else.
size_t parseSize(const char* text) {
  char* end = nullptr;
  unsigned long long v = strtoull(text, &end, 10);
  if (end == text) return 0;
  switch (*end) {
    case 'k': case 'K': v <<= 10, ++end; break;
    case 'm': case 'M': v <<= 20, ++end; break;
    case 'g': case 'G': v <<= 30, ++end; break;
    default: break;
  }
  return *end ? 0 : (size_t)v;
}

// 0 when rank r ran through, 1 (and why, on stderr) when it threw.
int run(const std::function<void(int, void*)>& rank, int r, void* shared) {
  try {
    rank(r, shared);
    return 0;
  } catch (const std::exception& e) {
    fprintf(stderr, "%s rank %d: %s\n", program_invocation_short_name, r, e.what());
    return 1;
  }
}

[[noreturn]] void usage(const char* prog, int code) {
  printf("usage: %s [-p provider] [-b min] [-e max] [-f factor] [-n iters] [-w window]\n", prog);
  exit(code);
}

}  // namespace

Options parse(int argc, char** argv) {
  Options o;
  auto size = [&](const char* t) {
    size_t v = parseSize(t);
    if (!v) fprintf(stderr, "bad size '%s'\n", t), exit(2);
    return v;
  };
  int c;
  while ((c = getopt(argc, argv, "p:b:e:f:n:w:h")) != -1) {
    switch (c) {
      case 'p': o.provider = optarg; break;
      case 'b': o.minBytes = size(optarg); break;
      case 'e': o.maxBytes = size(optarg); break;
      case 'f': o.factor = atoi(optarg); break;
      case 'n': o.iters = atoi(optarg); break;
      case 'w': o.window = atoi(optarg); break;
      default: usage(argv[0], c == 'h' ? 0 : 2);
    }
  }
  if (optind != argc) usage(argv[0], 2);
  if (o.factor < 2 || o.iters < 1 || o.window < 1 || o.minBytes > o.maxBytes)
    fprintf(stderr, "need -b <= -e, -f >= 2, -n >= 1, -w >= 1\n"), exit(2);
  return o;
}

std::vector<size_t> sizes(const Options& o) {
  std::vector<size_t> v;
  for (size_t b = o.minBytes; b <= o.maxBytes; b *= o.factor) v.push_back(b);
  return v;
}

int itersAt(const Options& o, size_t bytes) { return bytes >= (8u << 20) ? 10 : o.iters; }

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Barrier::wait(const std::function<void()>& idle) {
  int g = gen.load();
  if (count.fetch_add(1) + 1 == 2) {
    count.store(0);
    gen.fetch_add(1);
    return;
  }
  while (gen.load() == g) {
    if (idle) idle();
    else usleep(50);
  }
}

int runPair(size_t sharedBytes, const std::function<void(void*)>& init,
            const std::function<void(int rank, void* shared)>& rank) {
  // Loopback unless told otherwise: both ranks are on this machine.
  setenv("FI_TCP_IFACE", "lo", 0);
  void* shared = mmap(nullptr, sharedBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                      -1, 0);
  if (shared == MAP_FAILED) return perror("mmap"), 1;
  init(shared);
  fflush(stdout);
  fflush(stderr);
  pid_t child = fork();
  if (child < 0) return perror("fork"), 1;
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // rank 0 failed and left: do not spin on alone
    int rc = run(rank, 1, shared);
    fflush(stdout);
    fflush(stderr);
    _exit(rc);
  }
  int rc = run(rank, 0, shared);
  int status = 0;
  waitpid(child, &status, 0);
  munmap(shared, sharedBytes);
  return rc || !WIFEXITED(status) || WEXITSTATUS(status);
}

}  // namespace netbench
