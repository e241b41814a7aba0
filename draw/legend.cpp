#include "draw/legend.h"

#include "draw/labels.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <tuple>

namespace ptopt::draw {

using ir::Node;
using ir::Opcode;

GraphStats graphStats(const ir::Graph& g) {
  GraphStats s;
  std::set<std::string> seen;
  g.walk([&](Node* n) {
    ++s.nodes;
    if (n->isCall()) ++s.opCounts[shortOp(n)];
    if (isCastNode(n)) ++s.casts;
    if (isLayoutConversion(n)) ++s.layoutConversions;
    if (n->opcode() == Opcode::GetAttr && seen.insert(n->target()).second && g.constants().contains(n->target())) {
      const c10::IValue& v = g.constants().at(n->target());
      if (v.isTensor()) s.parameterBytes += v.toTensor().nbytes();
    }
  });
  return s;
}

std::string swatch(const std::string& fill, const std::string& line, const std::string& text,
                   const std::string& fontColour) {
  return fmt::format("<TD BGCOLOR=\"{}\" COLOR=\"{}\" BORDER=\"1\"><FONT POINT-SIZE=\"9\" COLOR=\"{}\">{}</FONT></TD>",
                     fill, line, fontColour, html(text));
}

namespace {

bool hasConv(const ir::Graph& g) {
  bool found = false;
  g.walk([&](Node* n) { found = found || familyOf(n) == Family::Conv; });
  return found;
}

std::string colourKey(const ir::Graph& g, DotColorBy colorBy) {
  std::string cells;
  if (colorBy == DotColorBy::Dtype) {
    std::set<std::string> seen;
    g.walk([&](Node* n) {
      auto t = outputDtype(n);
      if (t && seen.insert(dtypeShort(*t)).second) cells += swatch(dtypeFill(t), "#606060", dtypeShort(*t));
    });
    if (cells.empty()) cells = "<TD><FONT POINT-SIZE=\"9\">no dtypes known (give --input-shape)</FONT></TD>";
  } else {
    std::set<Family> seen;
    g.walk([&](Node* n) { if (n->isCall()) seen.insert(familyOf(n)); });
    for (Family f : seen) cells += swatch(familyFill(f), f == Family::Convert ? "#c0392b" : "#606060", familyName(f));
  }
  return "<TABLE BORDER=\"0\" CELLSPACING=\"2\" CELLPADDING=\"2\"><TR>" + cells + "</TR></TABLE>";
}

std::string diffKey() {
  return "<TABLE BORDER=\"0\" CELLSPACING=\"2\" CELLPADDING=\"2\"><TR>" + swatch(kAddedFill, kAddedLine, "added") +
         swatch(kChangedFill, kChangedLine, "changed") + swatch("#ffffff", kRemovedLine, "removed (dashed)", kRemovedText) +
         swatch("#ffffff", "#606060", "unchanged") + "</TR></TABLE>";
}

void diffRows(std::string& t, const LegendInput& in, const GraphStats& now) {
  const GraphStats& was = *in.before;
  t += fmt::format("<TR><TD ALIGN=\"LEFT\" COLSPAN=\"4\">{}</TD></TR>", diffKey());
  t += "<TR><TD ALIGN=\"LEFT\"><B>op</B></TD><TD ALIGN=\"RIGHT\"><B>before</B></TD><TD ALIGN=\"RIGHT\"><B>after</B></TD>"
       "<TD ALIGN=\"RIGHT\"><B>Δ</B></TD></TR>";
  auto row = [&](const std::string& name, const std::string& b, const std::string& a, const std::string& d,
                 bool highlight) {
    // GraphViz rejects an empty <B></B> (and then drops the whole label).
    auto bold = [&](const std::string& x) { return highlight && !x.empty() ? "<B>" + x + "</B>" : x; };
    t += fmt::format("<TR><TD ALIGN=\"LEFT\">{}</TD><TD ALIGN=\"RIGHT\">{}</TD><TD ALIGN=\"RIGHT\">{}</TD>"
                     "<TD ALIGN=\"RIGHT\">{}</TD></TR>",
                     html(name), b, bold(a), bold(html(d)));
  };
  auto delta = [](long d) { return d == 0 ? std::string("") : d > 0 ? "+" + std::to_string(d) : "−" + std::to_string(-d); };
  auto countOf = [](const GraphStats& s, const std::string& op) { return s.opCounts.count(op) ? s.opCounts.at(op) : 0; };
  std::set<std::string> ops;
  for (const auto& [op, c] : was.opCounts) ops.insert(op);
  for (const auto& [op, c] : now.opCounts) ops.insert(op);
  std::vector<std::tuple<bool, size_t, std::string>> rows;
  for (const auto& op : ops) {
    const size_t b = countOf(was, op), a = countOf(now, op);
    rows.emplace_back(a == b, std::max(a, b), op);
  }
  std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) {
    if (std::get<0>(x) != std::get<0>(y)) return !std::get<0>(x);  // changed first
    if (std::get<1>(x) != std::get<1>(y)) return std::get<1>(x) > std::get<1>(y);
    return std::get<2>(x) < std::get<2>(y);
  });
  size_t shown = 0, rest = 0;
  for (const auto& [same, n, op] : rows) {
    if (shown >= 10 && same) { ++rest; continue; }
    const size_t b = countOf(was, op), a = countOf(now, op);
    row(op, std::to_string(b), std::to_string(a), delta(static_cast<long>(a) - static_cast<long>(b)), !same);
    ++shown;
  }
  if (rest) t += fmt::format("<TR><TD ALIGN=\"LEFT\" COLSPAN=\"4\"><I>{} more op kinds unchanged</I></TD></TR>", rest);
  auto countRow = [&](const std::string& name, size_t b, size_t a) {
    row(name, std::to_string(b), std::to_string(a), delta(static_cast<long>(a) - static_cast<long>(b)), a != b);
  };
  countRow("nodes", was.nodes, now.nodes);
  countRow("casts", was.casts, now.casts);
  countRow("layout conversions", was.layoutConversions, now.layoutConversions);
  if (in.beforeBytesKnown)
    row("parameter bytes", bytesText(was.parameterBytes), bytesText(now.parameterBytes), "",
        was.parameterBytes != now.parameterBytes);
  else
    row("parameter bytes", "?", bytesText(now.parameterBytes), "", false);
  t += fmt::format("<TR><TD ALIGN=\"LEFT\" COLSPAN=\"4\"><FONT POINT-SIZE=\"10\">{} added, {} changed, {} removed "
                   "nodes</FONT></TD></TR>",
                   in.counts.added, in.counts.changed, in.counts.removed);
}

void graphRows(std::string& t, const LegendInput& in, const GraphStats& now) {
  t += fmt::format("<TR><TD ALIGN=\"LEFT\" COLSPAN=\"4\">{} nodes · {} parameters · {} casts · {} layout "
                   "conversions</TD></TR>",
                   now.nodes, bytesText(now.parameterBytes), now.casts, now.layoutConversions);
  std::vector<std::pair<size_t, std::string>> sorted;
  for (const auto& [op, c] : now.opCounts) sorted.emplace_back(c, op);
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::string line, text;
  for (size_t i = 0; i < sorted.size() && i < 12; ++i) {
    std::string piece = fmt::format("{} {}", sorted[i].second, sorted[i].first);
    if (!line.empty() && line.size() + piece.size() > 70) { text += html(line) + "<BR ALIGN=\"LEFT\"/>"; line.clear(); }
    line += (line.empty() ? "" : " · ") + piece;
  }
  if (sorted.size() > 12) line += fmt::format(" · +{} more kinds", sorted.size() - 12);
  text += html(line) + "<BR ALIGN=\"LEFT\"/>";
  t += "<TR><TD ALIGN=\"LEFT\" COLSPAN=\"4\"><FONT POINT-SIZE=\"10\">" + text + "</FONT></TD></TR>";
  t += "<TR><TD ALIGN=\"LEFT\" COLSPAN=\"4\">" + colourKey(*in.graph, in.colorBy) + "</TD></TR>";
  if (hasConv(*in.graph))
    t += "<TR><TD ALIGN=\"LEFT\" COLSPAN=\"4\"><FONT POINT-SIZE=\"9\" COLOR=\"#555555\">conv: kernel, "
         "s stride, p padding, d dilation, g groups · [CL] channels-last</FONT></TD></TR>";
}

}  // namespace

std::string legendLabel(const LegendInput& in) {
  const GraphStats now = graphStats(*in.graph);
  std::string t = "<<TABLE BORDER=\"0\" CELLBORDER=\"0\" CELLSPACING=\"0\" CELLPADDING=\"2\">";
  const std::string title = in.title.empty() ? "graph" : in.title;
  t += "<TR><TD ALIGN=\"LEFT\" COLSPAN=\"4\"><FONT POINT-SIZE=\"14\"><B>" + html(title) + "</B></FONT></TD></TR>";
  if (in.before) diffRows(t, in, now);
  else graphRows(t, in, now);
  for (const std::string& note : in.notes)
    t += fmt::format("<TR><TD ALIGN=\"LEFT\" COLSPAN=\"4\"><FONT POINT-SIZE=\"10\"><I>{}</I></FONT></TD></TR>",
                     html(note));
  if (!in.limitNote.empty() || in.omitted)
    t += fmt::format("<TR><TD ALIGN=\"LEFT\" COLSPAN=\"4\"><FONT COLOR=\"#b03a2e\">{}</FONT></TD></TR>",
                     html(in.omitted ? fmt::format("{} nodes not drawn (--max-nodes {}); try --depth 1", in.omitted,
                                                   in.maxNodes)
                                     : in.limitNote));
  return t + "</TABLE>>";
}

}  // namespace ptopt::draw
