#include "cli/table.h"

#include <algorithm>
#include <cmath>

#include "fmt/format.h"

namespace parity::cli {

size_t DisplayWidth(const std::string& text) {
  size_t width = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    if (c == 0xCC && i + 1 < text.size()) {
      const auto next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x80 && next <= 0xBF) continue;  // U+0300–U+033F combining marks
    }
    ++width;
  }
  return width;
}

std::string RenderTable(const TableRow& header, const std::vector<TableRow>& rows,
                        const std::vector<std::string>& left_aligned) {
  std::vector<size_t> widths(header.size(), 0);
  std::vector<bool> left(header.size(), false);
  for (size_t c = 0; c < header.size(); ++c) {
    widths[c] = DisplayWidth(header[c]);
    left[c] = std::find(left_aligned.begin(), left_aligned.end(), header[c]) != left_aligned.end();
  }
  for (const TableRow& row : rows) {
    for (size_t c = 0; c < row.size() && c < widths.size(); ++c) {
      widths[c] = std::max(widths[c], DisplayWidth(row[c]));
    }
  }
  auto render_row = [&](const TableRow& row) {
    std::string line;
    for (size_t c = 0; c < widths.size(); ++c) {
      const std::string& cell = c < row.size() ? row[c] : std::string();
      const std::string pad(widths[c] - std::min(widths[c], DisplayWidth(cell)), ' ');
      if (c > 0) line.append("  ");
      if (!left[c]) line.append(pad);
      line.append(cell);
      if (left[c] && c + 1 < widths.size()) line.append(pad);
    }
    line.push_back('\n');
    return line;
  };
  std::string out = render_row(header);
  size_t total = 0;
  for (size_t w : widths) total += w;
  out += std::string(total + 2 * (widths.empty() ? 0 : widths.size() - 1), '-') + "\n";
  for (const TableRow& row : rows) out += render_row(row);
  return out;
}

std::string RenderCsv(const TableRow& header, const std::vector<TableRow>& rows) {
  auto field = [](const std::string& text) {
    if (text.find_first_of(",\"\n") == std::string::npos) return text;
    std::string quoted = "\"";
    for (char c : text) {
      if (c == '"') quoted += '"';
      quoted += c;
    }
    return quoted + "\"";
  };
  auto line = [&](const TableRow& row) {
    std::string out;
    for (size_t c = 0; c < row.size(); ++c) {
      if (c > 0) out.push_back(',');
      out.append(field(row[c]));
    }
    out.push_back('\n');
    return out;
  };
  std::string out = line(header);
  for (const TableRow& row : rows) out += line(row);
  return out;
}

std::string Sci(double value) {
  std::string text = fmt::format("{:.3g}", value);
  const size_t e = text.find('e');
  if (e == std::string::npos) return text;
  std::string exponent = text.substr(e + 1);
  const bool negative = exponent[0] == '-';
  exponent.erase(0, exponent.find_first_not_of("+-0"));
  return text.substr(0, e + 1) + (negative ? "-" : "") + exponent;
}

std::string HumanCount(double value) {
  static constexpr struct {
    double scale;
    const char* suffix;
  } kUnits[] = {{1e12, "T"}, {1e9, "B"}, {1e6, "M"}, {1e3, "K"}};
  for (const auto& unit : kUnits) {
    if (std::fabs(value) >= unit.scale) {
      return fmt::format("{:.3g}{}", value / unit.scale, unit.suffix);
    }
  }
  return fmt::format("{:.4g}", value);
}

}  // namespace parity::cli
