#include "agent/core/text_exposition.h"

#include <charconv>
#include <cmath>

namespace ncclscope::metrics {
namespace {

// Length of the valid UTF-8 sequence at the start of `text` (1-4), or 0 when it is not one
// (overlong forms, surrogates and code points past U+10FFFF included).
std::size_t Utf8Length(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (text.size() < n) return 0;
  if (byte(1) < lo || byte(1) > hi) return 0;
  for (std::size_t i = 2; i < n; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return n;
}

// Escapes as the text format requires, and replaces every byte that is not part of valid UTF-8
// with U+FFFD: label values come from jobs (a job id is any environment variable), and one
// invalid byte makes Prometheus reject the whole scrape.
void AppendEscaped(std::string& out, std::string_view text, bool quote) {
  while (!text.empty()) {
    const char c = text.front();
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '"':
        out += quote ? "\\\"" : "\"";
        break;
      default: {
        const std::size_t n = Utf8Length(text);
        if (n == 0) {
          out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
          text.remove_prefix(1);
        } else {
          out.append(text.data(), n);
          text.remove_prefix(n);
        }
        continue;
      }
    }
    text.remove_prefix(1);
  }
}

}  // namespace

void AppendLabel(std::string& out, std::string_view name, std::string_view value) {
  out += name;
  out += "=\"";
  AppendEscaped(out, value, true);
  out += '"';
}

void AppendNumber(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
    return;
  }
  if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
    return;
  }
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out.append(buffer, result.ptr);
}

void AppendNumber(std::string& out, std::uint64_t value) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out.append(buffer, result.ptr);
}

HistogramBounds::HistogramBounds(std::vector<double> bounds) : bounds_(std::move(bounds)) {
  for (const double bound : bounds_) {
    std::string le = "le=\"";
    AppendNumber(le, bound);
    le += '"';
    le_.push_back(std::move(le));
  }
  le_.emplace_back("le=\"+Inf\"");
}

void TextWriter::Header(const MetricDef& family) {
  out_ += "# HELP ";
  out_ += family.name;
  out_ += ' ';
  AppendEscaped(out_, family.help, false);
  out_ += "\n# TYPE ";
  out_ += family.name;
  out_ += ' ';
  out_ += TypeName(family.type);
  out_ += '\n';
}

void TextWriter::Start(std::string_view name, std::string_view suffix, std::string_view labels,
                       std::string_view extra) {
  out_ += name;
  out_ += suffix;
  if (!labels.empty() || !extra.empty()) {
    out_ += '{';
    out_ += labels;
    if (!labels.empty() && !extra.empty()) out_ += ',';
    out_ += extra;
    out_ += '}';
  }
  out_ += ' ';
}

void TextWriter::Sample(const MetricDef& family, std::string_view labels, double value) {
  Start(family.name, "", labels);
  AppendNumber(out_, value);
  out_ += '\n';
}

void TextWriter::Sample(const MetricDef& family, std::string_view labels, std::uint64_t value) {
  Start(family.name, "", labels);
  AppendNumber(out_, value);
  out_ += '\n';
}

void TextWriter::Sample(const MetricDef& family, std::string_view labels, std::string_view extra,
                        double value) {
  Start(family.name, "", labels, extra);
  AppendNumber(out_, value);
  out_ += '\n';
}

void TextWriter::Histogram(const MetricDef& family, std::string_view labels,
                           const HistogramBounds& bounds, const std::uint64_t* counts, double sum) {
  const std::string_view name = family.name;
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < bounds.buckets(); ++i) {
    cumulative += counts[i];
    out_ += name;
    out_ += "_bucket{";
    if (!labels.empty()) {
      out_ += labels;
      out_ += ',';
    }
    out_ += bounds.le(i);
    out_ += "} ";
    AppendNumber(out_, cumulative);
    out_ += '\n';
  }
  Start(name, "_sum", labels);
  AppendNumber(out_, sum);
  out_ += '\n';
  Start(name, "_count", labels);
  AppendNumber(out_, cumulative);
  out_ += '\n';
}

}  // namespace ncclscope::metrics
