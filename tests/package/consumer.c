/* Links against the installed rmacc and asks it its version: the C API is usable from C. */
#include <rmacc.h>
#include <stdio.h>

int main(void) {
  int version = 0;
  if (rmaccGetVersion(&version) != rmaccSuccess || version != RMACC_VERSION_CODE) return 1;
  printf("rmacc %d: %s\n", version, rmaccGetErrorString(rmaccInvalidUsage));
  return 0;
}
