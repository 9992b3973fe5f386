// QueryResults' keyset paging, shared by both stores: the order a query asks for and its page
// token. A token is the position after the last row served — the order key of that row (its
// sweep and ordinal in grid order; its order column's value and run id otherwise) — plus the
// walk's start and a fingerprint of the query it belongs to, so a page costs the rows it holds,
// never the rows before it (an OFFSET walk of a 100,000-run sweep was quadratic: bench/load).
//
// Keys that change while a walk goes on (a run's state, a success's columns, ΔBPC) are ordered
// as they were at the walk's start (`as_of`, the first page's time), so that a walk returns every
// row at most once and every row that existed throughout exactly once, whatever happens to the
// runs meanwhile; the rows themselves are current.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "server/store/paging.h"
#include "server/store/read_models.h"
#include "server/store/uuid.h"

namespace parity::server {

// What a results column holds, for checking a cursor's key before it reaches a query.
enum class ResultsKeyKind { kText, kInteger, kReal };

// Columns whose value a run's progress changes: ordered as of the walk's start.
inline constexpr std::string_view kResultsMutableColumns[] = {
    "state", "measured_flops_per_token", "final_val_bpc", "wall_seconds", "delta_bpc_vs_dense"};

inline ResultsKeyKind ResultsColumnKind(std::string_view column) {
  for (std::string_view text :
       {"name", "role", "layout", "state", "compute_budget", "data_variant"}) {
    if (column == text) return ResultsKeyKind::kText;
  }
  for (std::string_view integer : {"d_model", "num_layers", "num_experts", "top_k", "expert_hidden",
                                   "params", "active_params", "tokens", "unique_tokens", "seed"}) {
    if (column == integer) return ResultsKeyKind::kInteger;
  }
  return ResultsKeyKind::kReal;
}

// The integer columns stored as bigint; the others are integer (32 bits).
inline bool Is64BitColumn(std::string_view column) {
  for (std::string_view wide : {"params", "active_params", "tokens", "unique_tokens", "seed"}) {
    if (column == wide) return true;
  }
  return false;
}

struct ResultsOrder {
  std::string column;  // a column of kResultsOrderColumns; empty = grid order (sweep, ordinal)
  bool descending = false;

  bool grid() const { return column.empty(); }
  bool mutable_key() const {
    return std::find(std::begin(kResultsMutableColumns), std::end(kResultsMutableColumns),
                     column) != std::end(kResultsMutableColumns);
  }
};

// "column" or "column desc" (any case) of kResultsOrderColumns; empty = grid order.
inline absl::StatusOr<ResultsOrder> ParseResultsOrder(const std::string& order_by) {
  ResultsOrder order;
  if (order_by.empty()) return order;
  std::vector<std::string> words = absl::StrSplit(order_by, ' ', absl::SkipEmpty());
  order.descending = words.size() == 2 && absl::AsciiStrToLower(words[1]) == "desc";
  const bool known = !words.empty() &&
                     std::any_of(std::begin(kResultsOrderColumns), std::end(kResultsOrderColumns),
                                 [&](std::string_view c) { return words[0] == c; });
  if (!known || words.size() > 2 || (words.size() == 2 && !order.descending)) {
    return absl::InvalidArgumentError(
        absl::StrCat("order_by '", order_by, "' is not a results field [desc]"));
  }
  order.column = words[0];
  return order;
}

// The position after a page's last row.
struct ResultsCursor {
  int64_t as_of = 0;  // the walk's start, in the store's own terms (opaque to callers)
  bool key_null = false;
  std::string key;  // grid order: the sweep id; else the order column's value as text
  std::string tie;  // grid order: the ordinal; else the run id
};

namespace results_paging_internal {

// FNV-1a over the query's filter and order: a token only continues the walk it came from.
inline std::string Fingerprint(const ResultsQuery& query, const ResultsOrder& order) {
  std::vector<int> states(query.states.begin(), query.states.end());
  std::sort(states.begin(), states.end());
  const std::string text = absl::StrCat(
      query.sweep_id, "\n", absl::StrJoin(states, ","), "\n", query.layout, "\n",
      absl::StrFormat("%.17g\n%.17g\n", query.min_activation_rate, query.max_activation_rate),
      order.column, order.descending ? " desc" : "");
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return absl::StrFormat("%016x", hash);
}

// Whether a text key can reach a query: well-formed UTF-8 (no overlong forms, surrogates or code
// points past U+10FFFF) without NUL, as PostgreSQL's text accepts.
inline bool IsQueryableText(absl::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte == 0) return false;
    const size_t length = byte < 0x80                   ? 1
                          : byte >= 0xC2 && byte < 0xE0 ? 2
                          : byte >= 0xE0 && byte < 0xF0 ? 3
                          : byte >= 0xF0 && byte < 0xF5 ? 4
                                                        : 0;
    if (length == 0 || i + length > text.size()) return false;
    uint32_t code = length == 1 ? byte : byte & (0x7F >> length);
    for (size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    if ((length == 3 && (code < 0x800 || (code >= 0xD800 && code < 0xE000))) ||
        (length == 4 && (code < 0x10000 || code > 0x10FFFF))) {
      return false;
    }
    i += length;
  }
  return true;
}

inline absl::Status Refused(absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("page_token is not valid: ", why,
                   "; pass the next_page_token of the previous page of the same query, or none "
                   "to start again"));
}

}  // namespace results_paging_internal

inline std::string EncodeResultsCursor(const ResultsQuery& query, const ResultsOrder& order,
                                       const ResultsCursor& cursor) {
  // The key goes last: it is the only part that may hold any character.
  return EncodePageToken(absl::StrCat("r1|", results_paging_internal::Fingerprint(query, order),
                                      "|", cursor.as_of, "|", cursor.key_null ? "N" : "V", "|",
                                      cursor.tie, "|", cursor.key));
}

// The cursor of query.page.page_token; nullopt for the first page. A token that is not one of
// ours, or was issued for another filter or order_by, is INVALID_ARGUMENT naming page_token.
inline absl::StatusOr<std::optional<ResultsCursor>> DecodeResultsCursor(const ResultsQuery& query,
                                                                        const ResultsOrder& order) {
  namespace in = results_paging_internal;
  if (query.page.page_token.empty()) return std::nullopt;
  std::string text;
  if (!absl::WebSafeBase64Unescape(query.page.page_token, &text)) {
    return in::Refused("not a token this server issued");
  }
  std::vector<std::string> parts = absl::StrSplit(text, absl::MaxSplits('|', 5));
  ResultsCursor cursor;
  if (parts.size() != 6 || parts[0] != "r1" || !absl::SimpleAtoi(parts[2], &cursor.as_of) ||
      (parts[3] != "N" && parts[3] != "V")) {
    return in::Refused("not a token this server issued");
  }
  if (parts[1] != in::Fingerprint(query, order)) {
    return in::Refused("it was issued for another filter or order_by");
  }
  cursor.key_null = parts[3] == "N";
  cursor.tie = std::move(parts[4]);
  cursor.key = std::move(parts[5]);
  bool ok = true;
  if (order.grid()) {
    int32_t ordinal = 0;
    ok = !cursor.key_null && IsUuid(cursor.key) && absl::SimpleAtoi(cursor.tie, &ordinal) &&
         ordinal >= 0;
  } else {
    ok = IsUuid(cursor.tie) && (cursor.key_null ? cursor.key.empty() : true);
    const ResultsKeyKind kind = ResultsColumnKind(order.column);
    if (ok && !cursor.key_null && kind == ResultsKeyKind::kText) {
      ok = in::IsQueryableText(cursor.key);
    } else if (ok && !cursor.key_null && kind == ResultsKeyKind::kInteger) {
      int64_t value = 0;
      ok = absl::SimpleAtoi(cursor.key, &value) &&
           (Is64BitColumn(order.column) || (value >= INT32_MIN && value <= INT32_MAX));
    } else if (ok && !cursor.key_null && kind == ResultsKeyKind::kReal) {
      double value = 0;
      ok = absl::SimpleAtod(cursor.key, &value);
    }
  }
  if (!ok) return in::Refused("its position is malformed");
  return cursor;
}

}  // namespace parity::server
