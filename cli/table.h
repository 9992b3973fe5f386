// Plain-text tables for the terminal and CSV for tools, shared by every subcommand that prints
// rows. Widths count display columns, so UTF-8 headers such as "D̂" stay aligned.
#pragma once

#include <string>
#include <vector>

namespace parity::cli {

using TableRow = std::vector<std::string>;

// Columns left-aligned when their header is in `left_aligned`, else right-aligned; two spaces
// between columns; a rule under the header.
std::string RenderTable(const TableRow& header, const std::vector<TableRow>& rows,
                        const std::vector<std::string>& left_aligned = {});

// RFC 4180 CSV: fields with commas, quotes or newlines are quoted.
std::string RenderCsv(const TableRow& header, const std::vector<TableRow>& rows);

// Display width of UTF-8 text: code points, not counting combining marks.
size_t DisplayWidth(const std::string& text);

// Three significant figures in compact scientific notation: 4.72e9, 2.86e21.
std::string Sci(double value);

// 1234567 → "1.23M", 6.48e9 → "6.48B"; below 1000 as is.
std::string HumanCount(double value);

}  // namespace parity::cli
