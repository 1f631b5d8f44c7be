// server/ui_page.h
//
// The status page at /ui: one HTML document with Chart.js inline (assets/), which reads
// /ui/data every second (Service::UiJson) and draws ids per second by engine and tag, the
// worker id and lease, the hwm and how far ahead it runs, clock events, segment buffers and
// connections.

#ifndef SEKKA_SERVER_UI_PAGE_H_
#define SEKKA_SERVER_UI_PAGE_H_

#include <string>

namespace sekka::server {

const std::string& UiPage();

}  // namespace sekka::server

#endif  // SEKKA_SERVER_UI_PAGE_H_
