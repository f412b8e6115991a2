// rmacc-params: prints the parameters of core/config.h as the tables of the documents, markers
// included, so that the tables are pasted, never written by hand (config_test checks them):
// the public one goes into README.md, the internal and fixed ones into docs/configuration.md.
#include <cstdio>

#include "core/config.h"

int main() {
  using rmacc::ParamVisibility;
  std::printf("README.md:\n\n<!-- params: public -->\n%s<!-- params: end -->\n\n",
              rmacc::paramMarkdown(ParamVisibility::kPublic).c_str());
  std::printf("docs/configuration.md:\n\n<!-- params: internal -->\n%s<!-- params: end -->\n\n",
              rmacc::paramMarkdown(ParamVisibility::kInternal).c_str());
  std::printf("<!-- params: fixed -->\n%s<!-- params: end -->\n",
              rmacc::paramMarkdown(ParamVisibility::kFixed).c_str());
  return 0;
}
