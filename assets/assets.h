// assets/assets.h
//
// Files built into the binary: Chart.js (Debian's libjs-chart.js, MIT), inlined into the
// self-contained HTML of `sekka stats --html` and served by `sekka serve` at /ui. Embedded at
// build time with the assembler's .incbin, so the binary needs nothing at run time.

#ifndef SEKKA_ASSETS_ASSETS_H_
#define SEKKA_ASSETS_ASSETS_H_

#include <string_view>

namespace sekka::assets {

// chart.min.js of Chart.js 3 (UMD: defines window.Chart).
std::string_view ChartJs();

}  // namespace sekka::assets

#endif  // SEKKA_ASSETS_ASSETS_H_
