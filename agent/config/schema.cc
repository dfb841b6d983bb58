#include "agent/config/schema.h"

#include <algorithm>

namespace ncclscope::config {
namespace {

// Levenshtein distance, for "did you mean" on misspelled keys.
std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string EscapeCell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\";
    out += c;
  }
  return out;
}

// A section's description as a Markdown paragraph wrapped at docs/'s 100 columns (a test checks
// the width of docs/*.md, which embeds this reference); a word longer than a line stays whole.
std::string WrapParagraph(std::string_view text, std::size_t width = 100) {
  std::string out;
  std::size_t line = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t end = std::min(text.find(' ', pos), text.size());
    const std::string_view word = text.substr(pos, end - pos);
    if (line > 0 && line + 1 + word.size() > width) {
      out += '\n';
      line = 0;
    } else if (line > 0) {
      out += ' ';
      ++line;
    }
    out += word;
    line += word.size();
    pos = end + 1;
  }
  return out;
}

}  // namespace

std::string ConfigError::ToString() const {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(column);
  out += ": ";
  if (!key.empty()) out += key + ": ";
  out += message;
  return out;
}

Decoder::Decoder(std::string file, std::vector<ConfigError>* errors)
    : file_(std::move(file)), errors_(errors) {}

bool Decoder::OpenFrame(const YAML::Node& map, std::string path, const Entry* owner) {
  if (!map.IsMap()) {
    const std::string message = "expected a mapping of keys";
    if (owner != nullptr) {
      AddError(*owner, path, message);
    } else {
      AddErrorAt(map.Mark(), path, message + " at the top level");
    }
    return false;
  }
  Frame frame;
  frame.path = std::move(path);
  for (auto it = map.begin(); it != map.end(); ++it) {
    Entry entry;
    entry.key_mark = it->first.Mark();
    if (!it->first.IsScalar()) {
      AddErrorAt(entry.key_mark, frame.path, "keys must be plain words");
      continue;
    }
    entry.key = it->first.Scalar();
    entry.value = it->second;
    const bool duplicate = std::any_of(frame.entries.begin(), frame.entries.end(),
                                       [&](const Entry& e) { return e.key == entry.key; });
    if (duplicate) {
      const std::string full = frame.path.empty() ? entry.key : frame.path + "." + entry.key;
      AddErrorAt(entry.key_mark, full, "duplicate key");
      continue;
    }
    frame.entries.push_back(std::move(entry));
  }
  frames_.push_back(std::move(frame));
  return true;
}

void Decoder::CloseFrame() {
  Frame& frame = frames_.back();
  for (const Entry& entry : frame.entries) {
    if (entry.used) continue;
    std::string message = "unknown key";
    std::string best;
    std::size_t best_distance = 3;  // suggest only close matches
    for (const std::string& known : frame.known) {
      const std::size_t d = EditDistance(entry.key, known);
      if (d < best_distance) {
        best_distance = d;
        best = known;
      }
    }
    if (!best.empty()) message += " (did you mean \"" + best + "\"?)";
    AddErrorAt(entry.key_mark, PathOf(entry.key), message);
  }
  frames_.pop_back();
}

const Decoder::Entry* Decoder::Take(std::string_view key) {
  Frame& frame = frames_.back();
  frame.known.emplace_back(key);
  for (Entry& entry : frame.entries) {
    if (entry.key == key) {
      entry.used = true;
      return &entry;
    }
  }
  return nullptr;
}

std::string Decoder::PathOf(std::string_view key) const {
  const std::string& prefix = frames_.empty() ? std::string() : frames_.back().path;
  return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
}

void Decoder::AddError(const Entry& entry, std::string key_path, std::string message) {
  // Point at the value when there is one ("key: value"), else at the key ("key:" alone; yaml-cpp
  // places an empty value at the next token, which would mislead).
  const bool has_value = !entry.value.IsNull() && !entry.value.Mark().is_null();
  AddErrorAt(has_value ? entry.value.Mark() : entry.key_mark, std::move(key_path),
             std::move(message));
}

void Decoder::AddErrorAt(const YAML::Mark& mark, std::string key_path, std::string message) {
  ConfigError error;
  error.file = file_;
  if (!mark.is_null()) {
    error.line = mark.line + 1;
    error.column = mark.column + 1;
  }
  error.key = std::move(key_path);
  error.message = std::move(message);
  errors_->push_back(std::move(error));
}

std::string ReferenceWriter::Join(std::string_view key) const {
  std::string out;
  for (const std::string& part : prefix_) out += part + ".";
  return out + std::string(key);
}

void ReferenceWriter::AddRow(std::string key, std::string type, std::string default_value,
                             std::string allowed, std::string_view doc) {
  rows_.push_back({std::move(key), std::move(type), std::move(default_value), std::move(allowed),
                   std::string(doc)});
}

std::string ReferenceWriter::Markdown() const {
  std::string out;
  for (const SectionDoc& section : sections_) {
    out += "### `" + section.key + "`\n\n" + WrapParagraph(section.doc) + "\n\n";
    out += "| Key | Type | Default | Allowed | Meaning |\n|---|---|---|---|---|\n";
    const std::string prefix = section.key + ".";
    for (const Row& row : rows_) {
      const bool in_section =
          row.key.rfind(prefix, 0) == 0 && row.key.find('.', prefix.size()) == std::string::npos;
      if (!in_section) continue;
      out += "| `" + row.key + "` | " + row.type + " | `" + EscapeCell(row.default_value) + "` | " +
             EscapeCell(row.allowed) + " | " + EscapeCell(row.doc) + " |\n";
    }
    out += "\n";
  }
  return out;
}

}  // namespace ncclscope::config
