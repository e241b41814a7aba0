#include "rewriters/diff.h"

#include <algorithm>
#include <sstream>
#include <vector>

namespace ptopt::rewriters {

namespace {

std::vector<std::string> splitLines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

enum class Op { Keep, Remove, Add };

// Myers' greedy algorithm with the trace kept for backtracking.
std::vector<std::pair<Op, size_t>> diffOps(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  const long n = static_cast<long>(a.size()), m = static_cast<long>(b.size()), max = n + m;
  std::vector<long> v(static_cast<size_t>(2 * max + 2), 0);
  std::vector<std::vector<long>> trace;
  auto at = [&](long k) -> long& { return v[static_cast<size_t>(k + max + 1)]; };
  long found = -1;
  for (long d = 0; d <= max && found < 0; ++d) {
    trace.push_back(v);
    for (long k = -d; k <= d; k += 2) {
      long x = (k == -d || (k != d && at(k - 1) < at(k + 1))) ? at(k + 1) : at(k - 1) + 1;
      long y = x - k;
      while (x < n && y < m && a[static_cast<size_t>(x)] == b[static_cast<size_t>(y)]) { ++x; ++y; }
      at(k) = x;
      if (x >= n && y >= m) { found = d; break; }
    }
  }
  // Backtrack.
  std::vector<std::pair<Op, size_t>> ops;  // (op, index into a for Keep/Remove, into b for Add)
  long x = n, y = m;
  for (long d = found; d > 0; --d) {
    const auto& pv = trace[static_cast<size_t>(d)];
    auto pat = [&](long k) { return pv[static_cast<size_t>(k + max + 1)]; };
    long k = x - y;
    long prevK = (k == -d || (k != d && pat(k - 1) < pat(k + 1))) ? k + 1 : k - 1;
    long prevX = pat(prevK), prevY = prevX - prevK;
    while (x > prevX && y > prevY) { ops.push_back({Op::Keep, static_cast<size_t>(--x)}); --y; }
    if (x == prevX) ops.push_back({Op::Add, static_cast<size_t>(--y)});
    else ops.push_back({Op::Remove, static_cast<size_t>(--x)});
  }
  while (x > 0 && y > 0) { ops.push_back({Op::Keep, static_cast<size_t>(--x)}); --y; }
  std::reverse(ops.begin(), ops.end());
  return ops;
}

}  // namespace

std::string unifiedDiff(const std::string& before, const std::string& after, const std::string& beforeLabel,
                        const std::string& afterLabel, size_t context) {
  if (before == after) return "";
  const auto a = splitLines(before), b = splitLines(after);
  const auto ops = diffOps(a, b);
  std::ostringstream out;
  out << "--- " << beforeLabel << "\n+++ " << afterLabel << "\n";
  // Group changes into hunks with `context` lines around them.
  size_t i = 0;
  while (i < ops.size()) {
    while (i < ops.size() && ops[i].first == Op::Keep) ++i;
    if (i >= ops.size()) break;
    size_t start = i >= context ? i - context : 0;
    // Extend the hunk while the runs of unchanged lines between changes are
    // short enough to merge (at most 2 * context).
    size_t lastChange = i;
    for (size_t j = i; j < ops.size(); ++j) {
      if (ops[j].first != Op::Keep) lastChange = j;
      else if (j - lastChange > 2 * context) break;
    }
    const size_t end = std::min(ops.size(), lastChange + 1 + context);
    // Line numbers of the hunk.
    size_t aLine = 0, bLine = 0;
    for (size_t j = 0; j < start; ++j) {
      if (ops[j].first != Op::Add) ++aLine;
      if (ops[j].first != Op::Remove) ++bLine;
    }
    size_t aCount = 0, bCount = 0;
    for (size_t j = start; j < end; ++j) {
      if (ops[j].first != Op::Add) ++aCount;
      if (ops[j].first != Op::Remove) ++bCount;
    }
    out << "@@ -" << aLine + 1 << "," << aCount << " +" << bLine + 1 << "," << bCount << " @@\n";
    for (size_t j = start; j < end; ++j) {
      switch (ops[j].first) {
        case Op::Keep: out << " " << a[ops[j].second] << "\n"; break;
        case Op::Remove: out << "-" << a[ops[j].second] << "\n"; break;
        case Op::Add: out << "+" << b[ops[j].second] << "\n"; break;
      }
    }
    i = end;
  }
  return out.str();
}

}  // namespace ptopt::rewriters
