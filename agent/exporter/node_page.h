#pragma once

#include <string>

namespace ncclscope {

// The node page served at / (agent/exporter/node_page.html, embedded at build time): a static
// page whose script fetches the metrics path from the same origin, with the same credentials,
// and renders this node's jobs, ranks, ports, NVLinks and sources in the browser. The server only
// sends a constant string, so a page left open costs a scrape every 5 s and nothing more, and
// never holds up Prometheus. The script builds its DOM from text nodes only, so job-supplied
// strings (job ids, communicator and pod names) cannot become markup (docs/trust-model.md).
struct NodePage {
  std::string html;
  // Content-Security-Policy: only the page's own script and style (by SHA-256) run, it may only
  // fetch from its origin, and loads nothing else; a value that slipped into markup could still
  // neither run script nor load an image.
  std::string content_security_policy;
};

// The page for a server whose metrics live at `metrics_path` (written into the page, escaped).
NodePage MakeNodePage(const std::string& metrics_path);

}  // namespace ncclscope
