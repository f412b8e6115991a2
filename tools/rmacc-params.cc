// rmacc-params: prints the RMACC_* parameters of core/config.h as the README's two tables,
// markers included, so that the README section is pasted, never written by hand
// (config_test checks that it matches).
#include <cstdio>

#include "core/config.h"

int main() {
  using rmacc::ParamVisibility;
  std::printf("<!-- params: public -->\n%s<!-- params: end -->\n\n",
              rmacc::paramMarkdown(ParamVisibility::kPublic).c_str());
  std::printf("<!-- params: internal -->\n%s<!-- params: end -->\n",
              rmacc::paramMarkdown(ParamVisibility::kInternal).c_str());
  return 0;
}
