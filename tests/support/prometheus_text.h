// A small reader of the Prometheus text exposition format (0.0.4) for tests that scrape a real
// /metrics: samples with their labels, the HELP and TYPE of each family, and every line it could
// not read. Strict on purpose: an unreadable line, a sample without TYPE/HELP or a duplicate
// series is reported, since a real Prometheus would reject or mis-file it. Also runs
// `promtool check metrics` (its linter) on a scrape, and reads deploy/prometheus/metrics.txt,
// the list of exported families the dashboards and alerts are checked against.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace parity::testing {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Exposition {
  std::vector<Sample> samples;
  std::map<std::string, std::string> help;  // family → help text
  std::map<std::string, std::string> type;  // family → counter | gauge | histogram | ...
  std::vector<std::string> errors;          // what a strict reader objects to

  // The value of the one sample named `name` whose labels include `labels`; nullopt when none
  // or when several match (ask more precisely).
  std::optional<double> Value(const std::string& name,
                              const std::map<std::string, std::string>& labels = {}) const {
    std::optional<double> found;
    int matches = 0;
    for (const Sample& s : samples) {
      if (s.name != name) continue;
      bool all = true;
      for (const auto& [k, v] : labels) {
        const auto it = s.labels.find(k);
        all &= it != s.labels.end() && it->second == v;
      }
      if (all) {
        found = s.value;
        ++matches;
      }
    }
    return matches == 1 ? found : std::nullopt;
  }

  // Samples named `name` (any labels).
  std::vector<Sample> Series(const std::string& name) const {
    std::vector<Sample> out;
    for (const Sample& s : samples) {
      if (s.name == name) out.push_back(s);
    }
    return out;
  }

  // The family a sample belongs to: histogram samples drop _bucket/_sum/_count.
  std::string FamilyOf(const std::string& sample_name) const {
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string_view n = sample_name;
      const std::string_view s = suffix;
      if (n.size() > s.size() && n.substr(n.size() - s.size()) == s) {
        const std::string base(n.substr(0, n.size() - s.size()));
        const auto it = type.find(base);
        if (it != type.end() && (it->second == "histogram" || it->second == "summary")) return base;
      }
    }
    return sample_name;
  }

  // Family → the label names its samples carry (le and quantile left out).
  std::map<std::string, std::set<std::string>> FamilyLabels() const {
    std::map<std::string, std::set<std::string>> out;
    for (const Sample& s : samples) {
      std::set<std::string>& names = out[FamilyOf(s.name)];
      for (const auto& [k, v] : s.labels) {
        if (k != "le" && k != "quantile") names.insert(k);
      }
    }
    return out;
  }
};

inline Exposition ParseExposition(std::string_view text) {
  Exposition out;
  std::set<std::string> seen_series;
  std::istringstream in{std::string(text)};
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string where = "line " + std::to_string(number) + ": " + line;
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream words(line.substr(1));
      std::string kind, name;
      words >> kind >> name;
      std::string rest;
      std::getline(words, rest);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      if (kind == "HELP") out.help[name] = rest;
      if (kind == "TYPE") out.type[name] = rest;
      continue;
    }
    Sample sample;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') sample.name += line[i++];
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        std::string key, value;
        while (i < line.size() && line[i] != '=') key += line[i++];
        if (i + 1 >= line.size() || line[i + 1] != '"') break;
        i += 2;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\' && i + 1 < line.size()) {
            ++i;
            value += line[i] == 'n' ? '\n' : line[i];
          } else {
            value += line[i];
          }
          ++i;
        }
        ++i;  // closing quote
        sample.labels[key] = value;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size() || line[i] != '}') {
        out.errors.push_back("unterminated labels, " + where);
        continue;
      }
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') {
      out.errors.push_back("no value, " + where);
      continue;
    }
    const std::string value_text = line.substr(i + 1, line.find(' ', i + 1) - (i + 1));
    char* end = nullptr;
    sample.value = std::strtod(value_text.c_str(), &end);
    if (end == value_text.c_str() || *end != '\0') {
      out.errors.push_back("bad value, " + where);
      continue;
    }
    std::string key = sample.name;
    for (const auto& [k, v] : sample.labels) key += "|" + k + "=" + v;
    if (!seen_series.insert(key).second) out.errors.push_back("duplicate series, " + where);
    out.samples.push_back(std::move(sample));
  }
  for (const Sample& s : out.samples) {
    const std::string family = out.FamilyOf(s.name);
    if (out.type.count(family) == 0) out.errors.push_back("no TYPE for " + s.name);
    if (out.help[family].empty()) out.errors.push_back("no HELP for " + s.name);
  }
  return out;
}

// `promtool check metrics` on `text`: its exit status and what it printed (lint problems).
// Exit status 127 with a message when promtool is not installed (deploy/setup.sh installs it).
struct PromtoolResult {
  int exit_status = 0;
  std::string output;
};
inline PromtoolResult PromtoolCheckMetrics(const std::string& text, const std::string& scratch) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    return {127, "promtool not found on PATH (Debian package `prometheus`; deploy/setup.sh)"};
  }
  { std::ofstream(scratch, std::ios::trunc) << text; }
  const std::string command = "promtool check metrics < '" + scratch + "' 2>&1";
  PromtoolResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// deploy/prometheus/metrics.txt: "name type label,label" per family ("-" = no labels), '#'
// comments. The dashboards and alert rules may use only these (tests/deploy checks them).
struct ListedFamily {
  std::string type;
  std::set<std::string> labels;
};
inline std::map<std::string, ListedFamily> ReadMetricList(const std::string& path) {
  std::map<std::string, ListedFamily> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string name, type, labels;
    words >> name >> type >> labels;
    ListedFamily family{type, {}};
    if (labels != "-") {
      std::istringstream parts(labels);
      std::string label;
      while (std::getline(parts, label, ',')) family.labels.insert(label);
    }
    out[name] = family;
  }
  return out;
}

// Differences between the families of a scrape whose names start with `prefix` and the listed
// ones with that prefix: missing on either side, another type, other labels. Empty = equal.
inline std::vector<std::string> CompareWithList(const Exposition& scrape,
                                                const std::map<std::string, ListedFamily>& list,
                                                const std::string& prefix) {
  std::vector<std::string> problems;
  const std::map<std::string, std::set<std::string>> scraped = scrape.FamilyLabels();
  for (const auto& [name, labels] : scraped) {
    if (name.rfind(prefix, 0) != 0) continue;
    const auto it = list.find(name);
    if (it == list.end()) {
      problems.push_back(name + " is exported but not in the list");
      continue;
    }
    const auto type = scrape.type.find(name);
    if (type == scrape.type.end() || type->second != it->second.type) {
      problems.push_back(name + " has another type than listed (" + it->second.type + ")");
    }
    if (labels != it->second.labels) problems.push_back(name + " has other labels than listed");
  }
  for (const auto& [name, family] : list) {
    if (name.rfind(prefix, 0) == 0 && scraped.count(name) == 0) {
      problems.push_back(name + " is listed but not exported");
    }
  }
  return problems;
}

}  // namespace parity::testing
