#include "assets/assets.h"

// SEKKA_CHARTJS is the path of chart.min.js (assets/CMakeLists.txt); the file is a dependency
// of this object, so a new libjs-chart.js rebuilds it.
#define SEKKA_STR2(x) #x
#define SEKKA_STR(x) SEKKA_STR2(x)

asm(".section .rodata\n"
    ".balign 16\n"
    "sekka_chartjs_begin:\n"
    ".incbin \"" SEKKA_STR(SEKKA_CHARTJS) "\"\n"
    "sekka_chartjs_end:\n"
    ".byte 0\n"
    ".previous\n");

extern "C" const char sekka_chartjs_begin[];
extern "C" const char sekka_chartjs_end[];

namespace sekka::assets {

std::string_view ChartJs() {
  return {sekka_chartjs_begin, static_cast<std::size_t>(sekka_chartjs_end - sekka_chartjs_begin)};
}

}  // namespace sekka::assets
