// The blocks' own counters in the node's statistics: per LDM instance and
// per TC instance, and their total, as tables in `stats` (and so in the
// periodic statistics log) and as arrays in `stats json`. Slow path: the
// connection thread (or DataNode::stats_text's caller) reads each block's
// relaxed counters (LdmBlock::stats, TcBlock::stats) once per request.
#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "fjord/engine/blocks/ldm.h"
#include "fjord/engine/blocks/tc.h"
#include "node_internal.h"

namespace fjord::engine {
namespace {

// One column of a block table. `json` names the field in `stats json` (the
// struct's own name); `header` heads the text column (shorter, so that a
// table fits a terminal). A column with `per` shows field / per, with one
// decimal, in the text only: JSON readers divide the raw counters.
template <typename Stats>
struct Column {
  const char* json;
  const char* header;
  uint64_t Stats::*field;
  uint64_t Stats::*per = nullptr;
};

constexpr Column<LdmStats> kLdmKeyColumns[] = {
    {"key_operations", "key_ops", &LdmStats::key_operations},
    {"reads", "reads", &LdmStats::reads},
    {"inserts", "inserts", &LdmStats::inserts},
    {"updates", "updates", &LdmStats::updates},
    {"deletes", "deletes", &LdmStats::deletes},
    {"refused", "refused", &LdmStats::refused},
    {"lock_waits", "lock_waits", &LdmStats::lock_waits},
    {"commits", "commits", &LdmStats::commits},
    {"aborts", "aborts", &LdmStats::aborts},
    {"out_of_memory", "out_of_memory", &LdmStats::out_of_memory},
};
constexpr Column<LdmStats> kLdmScanColumns[] = {
    {"scans", "scans", &LdmStats::scans},
    {"scan_rows", "scan_rows", &LdmStats::scan_rows},
    {"scan_rounds", "scan_rounds", &LdmStats::scan_rounds},
    {nullptr, "rows_per_round", &LdmStats::scan_rows, &LdmStats::scan_rounds},
    {"lookahead_hits", "lookahead_hits", &LdmStats::lookahead_hits},
    {"index_searches", "index_searches", &LdmStats::index_searches},
};
constexpr Column<LdmStats> kLdmRecordColumns[] = {
    {"committed_rows", "committed_rows", &LdmStats::committed_rows},
    {"operation_records_in_use", "operation_records", &LdmStats::operation_records_in_use},
    {"lock_records_in_use", "lock_records", &LdmStats::lock_records_in_use},
    {"parked_now", "parked", &LdmStats::parked_now},
    {"scans_open", "scans_open", &LdmStats::scans_open},
};
constexpr Column<TcStats> kTcColumns[] = {
    {"transactions_committed", "committed", &TcStats::transactions_committed},
    {"transactions_aborted", "aborted", &TcStats::transactions_aborted},
    {"deadlock_aborts", "deadlock_aborts", &TcStats::deadlock_aborts},
    {"inactive_aborts", "inactive_aborts", &TcStats::inactive_aborts},
    {"drop_aborts", "drop_aborts", &TcStats::drop_aborts},
    {"operations", "operations", &TcStats::operations},
    {"scans", "scans", &TcStats::scans},
    {"refused_requests", "refused", &TcStats::refused_requests},
};

template <typename Stats>
std::string cell(const Stats& s, const Column<Stats>& c) {
  if (c.per == nullptr) return std::to_string(s.*c.field);
  if (s.*c.per == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(s.*c.field) / static_cast<double>(s.*c.per));
  return buf;
}

// The sum of every instance's counters (gauges too: records in use on the
// whole node), from the same snapshots the rows show, so the total row is
// the sum of the rows above it.
template <typename Stats, std::size_t N>
void add_to(Stats& total, const Stats& s, const Column<Stats> (&columns)[N]) {
  for (const Column<Stats>& c : columns)
    if (c.per == nullptr) total.*c.field += s.*c.field;
}

// "node 1 <title>:", a heading line, one line per instance ("<prefix> i")
// and "total"; each column as wide as its heading or its widest cell,
// numbers right-aligned, so the lines stay readable one by one in the log.
template <typename Stats, std::size_t N>
std::string text_table(NodeId self, const char* title, const char* prefix, const std::vector<Stats>& instances,
                       const Stats& total, const Column<Stats> (&columns)[N]) {
  std::vector<std::string> labels;
  std::vector<std::vector<std::string>> rows;
  for (std::size_t i = 0; i <= instances.size(); ++i) {
    const Stats& s = i < instances.size() ? instances[i] : total;
    labels.push_back(i < instances.size() ? std::string(prefix) + " " + std::to_string(i) : "total");
    rows.emplace_back();
    for (const Column<Stats>& c : columns) rows.back().push_back(cell(s, c));
  }
  std::size_t label_width = 8;  // "instance"
  for (const std::string& l : labels) label_width = std::max(label_width, l.size());
  std::size_t widths[N];
  for (std::size_t c = 0; c < N; ++c) {
    widths[c] = std::string_view(columns[c].header).size();
    for (const auto& row : rows) widths[c] = std::max(widths[c], row[c].size());
  }
  const auto line = [&](const std::string& label, auto&& text_of) {
    std::string out = "  " + label + std::string(label_width - label.size(), ' ');
    for (std::size_t c = 0; c < N; ++c) {
      const std::string text = text_of(c);
      out += std::string(2 + widths[c] - text.size(), ' ') + text;
    }
    return out + "\n";
  };
  std::string out = "node " + std::to_string(self) + " " + title + ":\n";
  out += line("instance", [&](std::size_t c) { return std::string(columns[c].header); });
  for (std::size_t r = 0; r < rows.size(); ++r) out += line(labels[r], [&](std::size_t c) { return rows[r][c]; });
  return out;
}

template <typename Stats, std::size_t N>
void json_fields(std::string& out, const Stats& s, const Column<Stats> (&columns)[N]) {
  for (const Column<Stats>& c : columns)
    if (c.json != nullptr)
      out += (out.back() == '{' ? "\"" : ",\"") + std::string(c.json) + "\":" + std::to_string(s.*c.field);
}

std::vector<LdmStats> ldm_snapshots(const std::vector<LdmBlock*>& blocks, LdmStats& total) {
  std::vector<LdmStats> out;
  for (const LdmBlock* b : blocks) {
    out.push_back(b->stats());
    add_to(total, out.back(), kLdmKeyColumns);
    add_to(total, out.back(), kLdmScanColumns);
    add_to(total, out.back(), kLdmRecordColumns);
  }
  return out;
}

std::vector<TcStats> tc_snapshots(const std::vector<TcBlock*>& blocks, TcStats& total) {
  std::vector<TcStats> out;
  for (const TcBlock* b : blocks) {
    out.push_back(b->stats());
    add_to(total, out.back(), kTcColumns);
  }
  return out;
}

}  // namespace

std::string DataNode::Impl::block_stats_text() const {
  LdmStats ldm_total;
  const std::vector<LdmStats> ldm = ldm_snapshots(ldm_blocks, ldm_total);
  TcStats tc_total;
  const std::vector<TcStats> tc = tc_snapshots(tc_blocks, tc_total);
  return text_table(self, "LDM key operations", "ldm", ldm, ldm_total, kLdmKeyColumns) +
         text_table(self, "LDM scans and lookups", "ldm", ldm, ldm_total, kLdmScanColumns) +
         text_table(self, "LDM records in use", "ldm", ldm, ldm_total, kLdmRecordColumns) +
         text_table(self, "TC transactions", "tc", tc, tc_total, kTcColumns);
}

std::string DataNode::Impl::block_stats_json() const {
  LdmStats ldm_total;
  const std::vector<LdmStats> ldm = ldm_snapshots(ldm_blocks, ldm_total);
  TcStats tc_total;
  const std::vector<TcStats> tc = tc_snapshots(tc_blocks, tc_total);
  const auto ldm_object = [](std::string head, const LdmStats& s) {
    json_fields(head, s, kLdmKeyColumns);
    json_fields(head, s, kLdmScanColumns);
    json_fields(head, s, kLdmRecordColumns);
    return head + "}";
  };
  const auto tc_object = [](std::string head, const TcStats& s) {
    json_fields(head, s, kTcColumns);
    return head + "}";
  };
  // A total has the fields of an instance's object but "instance".
  std::string out = ",\"ldm\":[";
  for (std::size_t i = 0; i < ldm.size(); ++i)
    out += (i == 0 ? "" : ",") + ldm_object("{\"instance\":" + std::to_string(i), ldm[i]);
  out += "],\"ldm_total\":" + ldm_object("{", ldm_total);
  out += ",\"tc\":[";
  for (std::size_t i = 0; i < tc.size(); ++i)
    out += (i == 0 ? "" : ",") + tc_object("{\"instance\":" + std::to_string(i), tc[i]);
  out += "],\"tc_total\":" + tc_object("{", tc_total);
  return out;
}

}  // namespace fjord::engine
