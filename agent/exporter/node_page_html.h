#pragma once

#include <string_view>

namespace ncclscope {

// agent/exporter/node_page.html, verbatim (generated node_page_html.cc).
extern const std::string_view kNodePageHtml;

}  // namespace ncclscope
