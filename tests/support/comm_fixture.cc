#include "support/comm_fixture.h"

#include <cstdio>
#include <cstring>

namespace rmacc::test {

size_t residentBytes() {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  size_t kb = 0;
  while (fgets(line, sizeof(line), f))
    if (strncmp(line, "VmRSS:", 6) == 0) sscanf(line + 6, "%zu", &kb);
  fclose(f);
  return kb * 1024;
}

}  // namespace rmacc::test
