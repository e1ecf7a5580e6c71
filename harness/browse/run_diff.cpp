// Compares two runs' configs key by key and their step records bit by bit.
#include "harness/browse/run_diff.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <tuple>

#include "harness/browse/export.hpp"
#include "harness/contract/recipe.hpp"

namespace faultline::harness {

namespace {

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

std::string text_of(const std::optional<double>& value) {
  return value ? csv_number(*value) : "-";
}

// The fields compared, each as an optional double (absent: not reported).
const std::vector<std::pair<const char*, std::function<std::optional<double>(const StepRecord&)>>>&
compared_fields() {
  using Field = std::function<std::optional<double>(const StepRecord&)>;
  auto whole = [](const std::optional<int64_t>& v) {
    return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
  };
  static const std::vector<std::pair<const char*, Field>> fields = {
      {"loss", [](const StepRecord& r) { return std::optional<double>(r.loss); }},
      {"grad_norm",
       [](const StepRecord& r) {
         return r.has_grad_norm ? std::optional(r.grad_norm) : std::nullopt;
       }},
      {"lr", [](const StepRecord& r) { return r.has_lr ? std::optional(r.lr) : std::nullopt; }},
      {"param_norm", [](const StepRecord& r) { return r.param_norm; }},
      {"update_ratio", [](const StepRecord& r) { return r.update_ratio; }},
      {"tokens", [whole](const StepRecord& r) { return whole(r.tokens); }},
      {"nonfinite", [whole](const StepRecord& r) { return whole(r.nonfinite); }}};
  return fields;
}

}  // namespace

std::vector<KeyChange> config_changes(const std::string& canonical_a,
                                      const std::string& canonical_b) {
  const auto a = contract::keys_of(canonical_a), b = contract::keys_of(canonical_b);
  std::map<std::string, KeyChange> changes;
  for (const auto& [key, value] : a)
    if (auto it = b.find(key); it == b.end() || it->second != value)
      changes[key] = {key, value, it == b.end() ? std::nullopt : std::optional(it->second)};
  for (const auto& [key, value] : b)
    if (!a.count(key)) changes[key] = {key, std::nullopt, value};
  std::vector<KeyChange> sorted;
  for (auto& [key, change] : changes) sorted.push_back(std::move(change));
  return sorted;
}

std::optional<RecordDifference> first_difference(std::vector<StepRecord> a,
                                                 std::vector<StepRecord> b) {
  auto by_step_rank = [](const StepRecord& x, const StepRecord& y) {
    return std::tie(x.step, x.rank) < std::tie(y.step, y.rank);
  };
  std::stable_sort(a.begin(), a.end(), by_step_rank);
  std::stable_sort(b.begin(), b.end(), by_step_rank);
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && by_step_rank(a[i], b[j])))
      return RecordDifference{a[i].step, a[i].rank, "record", "present", "-"};
    if (i == a.size() || by_step_rank(b[j], a[i]))
      return RecordDifference{b[j].step, b[j].rank, "record", "-", "present"};
    for (const auto& [name, field] : compared_fields()) {
      const auto x = field(a[i]), y = field(b[j]);
      if (x.has_value() != y.has_value() || (x && !same_bits(*x, *y)))
        return RecordDifference{a[i].step, a[i].rank, name, text_of(x), text_of(y)};
    }
    ++i;
    ++j;
  }
  return std::nullopt;
}

namespace {

std::optional<StepSpan> span_of(const std::vector<StepRecord>& records) {
  if (records.empty()) return std::nullopt;
  const auto [low, high] =
      std::minmax_element(records.begin(), records.end(),
                          [](const StepRecord& x, const StepRecord& y) { return x.step < y.step; });
  return StepSpan{low->step, high->step};
}

std::vector<StepRecord> within(const std::vector<StepRecord>& records, const StepSpan& span) {
  std::vector<StepRecord> kept;
  std::copy_if(records.begin(), records.end(), std::back_inserter(kept),
               [&](const StepRecord& r) { return r.step >= span.first && r.step <= span.last; });
  return kept;
}

}  // namespace

RecordComparison compare_records(const std::vector<StepRecord>& a,
                                 const std::vector<StepRecord>& b) {
  RecordComparison comparison;
  comparison.a = span_of(a);
  comparison.b = span_of(b);
  if (!comparison.a || !comparison.b) return comparison;
  const StepSpan common{std::max(comparison.a->first, comparison.b->first),
                        std::min(comparison.a->last, comparison.b->last)};
  if (common.first > common.last) return comparison;
  comparison.common = common;
  auto kept_a = within(a, common);
  comparison.compared = static_cast<int64_t>(kept_a.size());
  comparison.difference = first_difference(std::move(kept_a), within(b, common));
  return comparison;
}

std::vector<StepSpan> outside(const StepSpan& span, const StepSpan& common) {
  std::vector<StepSpan> parts;
  if (span.first < common.first) parts.push_back({span.first, common.first - 1});
  if (span.last > common.last) parts.push_back({common.last + 1, span.last});
  return parts;
}

}  // namespace faultline::harness
