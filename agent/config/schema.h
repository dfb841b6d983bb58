#pragma once

// The config schema is written once per section, as a Visit() member template:
//
//   struct ServerConfig {
//     std::string listen_address = ":9824";
//     template <typename V>
//     void Visit(V& v) {
//       v.Field("listen_address", listen_address, "Where /metrics is served.",
//       checks::ListenAddress());
//     }
//   };
//
// and three visitors walk it: Decoder (YAML -> struct, with file:line:col errors), Encoder (struct
// -> YAML, for --check-config) and ReferenceWriter (struct -> the table in docs/configuration.md).
// Adding a key is one line; adding a section is one struct plus one Section() call in
// Config::Visit.

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>
#include <vector>

#include "agent/config/checks.h"
#include "agent/config/value_codec.h"

namespace ncclscope::config {

// One problem found in a config file, printed as "file:line:col: key.path: message".
struct ConfigError {
  std::string file;
  int line = 0;  // 1-based; 0 when the problem is with the file as a whole
  int column = 0;
  std::string key;  // dotted key path, empty for file-level problems
  std::string message;

  std::string ToString() const;
};

// YAML -> config struct. Absent keys keep their defaults; every problem is recorded, none stops the
// walk, so one run of --check-config reports them all.
class Decoder {
 public:
  Decoder(std::string file, std::vector<ConfigError>* errors);

  // Decodes a whole document. An empty document means "all defaults".
  template <typename T>
  void DecodeDocument(const YAML::Node& root, T& target) {
    if (root.IsNull()) return;
    if (!OpenFrame(root, "")) return;
    target.Visit(*this);
    CloseFrame();
  }

  template <typename T, typename... Checks>
  void Field(std::string_view key, T& value, std::string_view /*doc*/, const Checks&... checks) {
    const Entry* entry = Take(key);
    if (entry == nullptr) return;
    std::string problem;
    T parsed = value;
    if (!ValueCodec<T>::Decode(entry->value, parsed, &problem)) {
      AddError(*entry, PathOf(key), problem);
      return;
    }
    bool ok = true;
    auto run = [&](const auto& check) {
      if (!ok) return;
      if (std::optional<std::string> bad = check(parsed)) {
        AddError(*entry, PathOf(key), *bad);
        ok = false;
      }
    };
    (run(checks), ...);
    (void)run;  // unused for fields without checks
    if (ok) value = std::move(parsed);
  }

  template <typename T>
  void Section(std::string_view key, T& section, std::string_view /*doc*/) {
    const Entry* entry = Take(key);
    if (entry == nullptr || entry->value.IsNull()) return;  // "plugin:" alone keeps the defaults
    if (!OpenFrame(entry->value, PathOf(key), entry)) return;
    section.Visit(*this);
    CloseFrame();
  }

 private:
  struct Entry {
    std::string key;
    YAML::Mark key_mark;
    YAML::Node value;
    bool used = false;
  };
  struct Frame {
    std::string path;
    std::vector<Entry> entries;
    std::vector<std::string> known;  // keys the schema asked for, for "did you mean"
  };

  bool OpenFrame(const YAML::Node& map, std::string path, const Entry* owner = nullptr);
  void CloseFrame();
  const Entry* Take(std::string_view key);
  std::string PathOf(std::string_view key) const;
  void AddError(const Entry& entry, std::string key_path, std::string message);
  void AddErrorAt(const YAML::Mark& mark, std::string key_path, std::string message);

  std::string file_;
  std::vector<ConfigError>* errors_;
  std::vector<Frame> frames_;
};

// Config struct -> YAML tree, keys in schema order.
class Encoder {
 public:
  template <typename T, typename... Checks>
  void Field(std::string_view key, const T& value, std::string_view /*doc*/,
             const Checks&... /*checks*/) {
    node_[std::string(key)] = ValueCodec<T>::Encode(value);
  }

  template <typename T>
  void Section(std::string_view key, T& section, std::string_view /*doc*/) {
    Encoder inner;
    section.Visit(inner);
    node_[std::string(key)] = inner.node_;
  }

  const YAML::Node& node() const { return node_; }

 private:
  YAML::Node node_{YAML::NodeType::Map};
};

// Config struct -> Markdown reference table rows (key, type, default, allowed values, meaning).
class ReferenceWriter {
 public:
  template <typename T, typename... Checks>
  void Field(std::string_view key, const T& value, std::string_view doc, const Checks&... checks) {
    std::string allowed;
    ((allowed += (allowed.empty() ? "" : "; ") + checks.Describe()), ...);
    YAML::Emitter out;
    out << YAML::Flow << ValueCodec<T>::Encode(value);
    AddRow(Join(key), std::string(ValueCodec<T>::kTypeName), out.c_str(), allowed, doc);
  }

  template <typename T>
  void Section(std::string_view key, T& section, std::string_view doc) {
    sections_.push_back({Join(key), std::string(doc)});
    prefix_.emplace_back(key);
    section.Visit(*this);
    prefix_.pop_back();
  }

  // The whole reference: one table per section.
  std::string Markdown() const;

 private:
  struct Row {
    std::string key, type, default_value, allowed, doc;
  };
  struct SectionDoc {
    std::string key, doc;
  };
  std::string Join(std::string_view key) const;
  void AddRow(std::string key, std::string type, std::string default_value, std::string allowed,
              std::string_view doc);

  std::vector<std::string> prefix_;
  std::vector<SectionDoc> sections_;
  std::vector<Row> rows_;
};

}  // namespace ncclscope::config
