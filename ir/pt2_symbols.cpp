// Symbolic sizes of a .pt2 program (see pt2_symbols.h). Plain C++: built in
// both worlds, as the rest of the .pt2 reader.
#include "ir/pt2_symbols.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace ptopt::ir {

struct SymExpr::Node {
  enum class Kind { Int, String, Name, Call } kind = Kind::Int;
  int64_t value = 0;
  std::string text;  // a string's contents, a name, a call's function
  std::vector<std::shared_ptr<const Node>> args;  // a call's positional arguments
};

namespace {

using NodePtr = std::shared_ptr<const SymExpr::Node>;
using Kind = SymExpr::Node::Kind;

// srepr: Name(arg, ..., key=value), integers, 'strings'.
class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  NodePtr parseAll() {
    NodePtr n = expr();
    skipSpace();
    if (i_ != s_.size()) throw std::invalid_argument("trailing text");
    return n;
  }

 private:
  void skipSpace() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char c) {
    skipSpace();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  std::string name() {
    skipSpace();
    size_t start = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) ++i_;
    if (start == i_) throw std::invalid_argument("expected a name");
    return s_.substr(start, i_ - start);
  }

  NodePtr expr() {
    skipSpace();
    if (i_ >= s_.size()) throw std::invalid_argument("unexpected end");
    auto n = std::make_shared<SymExpr::Node>();
    const char c = s_[i_];
    if (c == '\'' || c == '"') {
      const size_t end = s_.find(c, i_ + 1);
      if (end == std::string::npos) throw std::invalid_argument("unterminated string");
      n->kind = Kind::String;
      n->text = s_.substr(i_ + 1, end - i_ - 1);
      i_ = end + 1;
      return n;
    }
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      size_t used = 0;
      n->value = std::stoll(s_.substr(i_), &used);
      i_ += used;
      return n;
    }
    n->text = name();
    n->kind = Kind::Name;
    if (!eat('(')) return n;
    n->kind = Kind::Call;
    if (eat(')')) return n;
    do {
      // key=value (Symbol's assumptions) is read and left out.
      const size_t mark = i_;
      skipSpace();
      if (i_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[i_]))) {
        name();
        if (eat('=')) {
          expr();
          continue;
        }
      }
      i_ = mark;
      n->args.push_back(expr());
    } while (eat(','));
    if (!eat(')')) throw std::invalid_argument("expected )");
    return n;
  }

  const std::string& s_;
  size_t i_ = 0;
};

int64_t floorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::optional<int64_t> eval(const SymExpr::Node& n, const SymbolValues& at) {
  if (n.kind == Kind::Int) return n.value;
  if (n.kind != Kind::Call) return std::nullopt;
  const std::string& f = n.text;
  if (f == "Symbol") {
    if (n.args.empty() || n.args[0]->kind != Kind::String) return std::nullopt;
    auto it = at.find(n.args[0]->text);
    if (it == at.end()) return std::nullopt;
    return it->second;
  }
  std::vector<int64_t> v;
  for (const auto& a : n.args) {
    auto x = eval(*a, at);
    if (!x) return std::nullopt;
    v.push_back(*x);
  }
  if (v.empty()) return std::nullopt;
  if (f == "Integer") return v[0];
  if (f == "Add") {
    int64_t s = 0;
    for (int64_t x : v) s += x;
    return s;
  }
  if (f == "Mul") {
    int64_t p = 1;
    for (int64_t x : v) p *= x;
    return p;
  }
  if (f == "Max") return *std::max_element(v.begin(), v.end());
  if (f == "Min") return *std::min_element(v.begin(), v.end());
  if (v.size() != 2) return std::nullopt;
  const int64_t a = v[0], b = v[1];
  if (f == "Pow") {
    if (b < 0 || b > 62) return std::nullopt;
    int64_t p = 1;
    for (int64_t k = 0; k < b; ++k) p *= a;
    return p;
  }
  if (b == 0) return std::nullopt;
  if (f == "FloorDiv") return floorDiv(a, b);
  if (f == "CleanDiv") return a % b == 0 ? std::optional<int64_t>(a / b) : std::nullopt;
  if (f == "PythonMod" || f == "Mod") return a - floorDiv(a, b) * b;
  return std::nullopt;
}

void collectSymbols(const SymExpr::Node& n, std::set<std::string>& out) {
  if (n.kind == Kind::Call && n.text == "Symbol" && !n.args.empty() && n.args[0]->kind == Kind::String)
    out.insert(n.args[0]->text);
  for (const auto& a : n.args) collectSymbols(*a, out);
}

std::string integerText(int64_t v) { return "Integer(" + std::to_string(v) + ")"; }

}  // namespace

std::optional<SymExpr> SymExpr::parse(const std::string& srepr) {
  try {
    SymExpr e;
    e.root_ = Parser(srepr).parseAll();
    e.text_ = srepr;
    return e;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<int64_t> SymExpr::evaluate(const SymbolValues& at) const { return eval(*root_, at); }

std::set<std::string> SymExpr::symbols() const {
  std::set<std::string> out;
  collectSymbols(*root_, out);
  return out;
}

void Pt2Shapes::noteExpression(const std::string& srepr, std::optional<int64_t> hint) {
  if (std::find(expressions.begin(), expressions.end(), srepr) != expressions.end()) return;
  expressions.push_back(srepr);
  auto e = SymExpr::parse(srepr);
  if (!e) return;
  const auto syms = e->symbols();
  // A bare symbol: its own text, and its hint.
  if (syms.size() == 1 && srepr.rfind("Symbol(", 0) == 0) {
    symbolText.emplace(*syms.begin(), srepr);
    if (hint) hints.emplace(*syms.begin(), *hint);
  }
}

SymbolValues Pt2Shapes::valuesFor(const std::vector<std::vector<int64_t>>& inputSizes) const {
  SymbolValues out = hints;
  for (size_t i = 0; i < inputDims.size() && i < inputSizes.size(); ++i)
    for (size_t d = 0; d < inputDims[i].size() && d < inputSizes[i].size(); ++d) {
      auto it = symbolText.begin();
      for (; it != symbolText.end(); ++it)
        if (it->second == inputDims[i][d]) break;
      if (it != symbolText.end()) out[it->first] = inputSizes[i][d];
    }
  return out;
}

// Two values for `s` other than `h`, within its range, avoiding 0 and 1
// (sizes torch.export specializes on): h+1 and h+3 where they fit.
std::vector<int64_t> Pt2Shapes::movedValues(const std::string& s, int64_t h) const {
  auto it = ranges.find(s);
  auto allowed = [&](int64_t v) {
    if (v < 2) return false;
    if (it == ranges.end()) return true;
    return v >= it->second.min && (!it->second.max || v <= *it->second.max);
  };
  std::vector<int64_t> moved;
  for (int64_t d : {1, 3, -1, -2, 2, 4})
    if (moved.size() < 2 && allowed(h + d)) moved.push_back(h + d);
  return moved;
}

std::vector<SymbolValues> Pt2Shapes::samplePoints(const SymbolValues& base) const {
  std::vector<SymbolValues> points{base};
  for (const auto& [s, h] : base)
    for (int64_t v : movedValues(s, h)) {
      SymbolValues p = base;
      p[s] = v;
      points.push_back(p);
    }
  if (base.size() > 1) points.push_back(allMoved(base, 0));
  return points;
}

SymbolValues Pt2Shapes::allMoved(const SymbolValues& base, size_t which) const {
  SymbolValues p = base;
  for (const auto& [s, h] : base) {
    const auto moved = movedValues(s, h);
    if (which < moved.size()) p[s] = moved[which];
  }
  return p;
}

std::vector<std::vector<std::vector<int64_t>>> Pt2Shapes::otherInputSizes(
    const std::vector<std::vector<int64_t>>& given) const {
  std::vector<std::vector<std::vector<int64_t>>> out;
  const SymbolValues base = valuesFor(given);
  for (size_t which = 0; which < 2; ++which) {
    const auto sizes = inputSizesAt(allMoved(base, which), given);
    if (sizes && *sizes != given && std::find(out.begin(), out.end(), *sizes) == out.end()) out.push_back(*sizes);
  }
  return out;
}

std::optional<std::vector<std::vector<int64_t>>> Pt2Shapes::inputSizesAt(
    const SymbolValues& point, const std::vector<std::vector<int64_t>>& hintSizes) const {
  std::vector<std::vector<int64_t>> out = hintSizes;
  for (size_t i = 0; i < inputDims.size() && i < out.size(); ++i)
    for (size_t d = 0; d < inputDims[i].size() && d < out[i].size(); ++d) {
      if (inputDims[i][d].empty()) continue;
      auto e = SymExpr::parse(inputDims[i][d]);
      auto v = e ? e->evaluate(point) : std::nullopt;
      if (!v) return std::nullopt;
      out[i][d] = *v;
    }
  return out;
}

SizeExpressions::SizeExpressions(const Pt2Shapes& shapes, std::vector<SymbolValues> points)
    : shapes_(shapes), points_(std::move(points)) {
  for (const std::string& text : shapes.expressions) {
    auto e = SymExpr::parse(text);
    if (!e) continue;
    SizeTrace trace;
    for (const SymbolValues& p : points_) {
      auto v = e->evaluate(p);
      if (!v) break;
      trace.push_back(*v);
    }
    if (trace.size() == points_.size()) known_.emplace(trace, text);  // the first written wins
  }
}

std::optional<std::string> SizeExpressions::match(const SizeTrace& trace, std::optional<int64_t>* constant) const {
  *constant = std::nullopt;
  if (trace.empty() || trace.size() != points_.size()) return std::nullopt;
  if (std::all_of(trace.begin(), trace.end(), [&](int64_t v) { return v == trace[0]; })) {
    *constant = trace[0];
    return std::nullopt;
  }
  if (auto it = known_.find(trace); it != known_.end()) return it->second;
  auto symbol = [&](const std::string& s) {
    auto it = shapes_.symbolText.find(s);
    return it != shapes_.symbolText.end() ? it->second : "Symbol('" + s + "', positive=True, integer=True)";
  };
  auto fits = [&](auto&& f) {
    for (size_t i = 0; i < points_.size(); ++i)
      if (f(points_[i]) != trace[i]) return false;
    return true;
  };
  const SymbolValues& p0 = points_[0];
  // a . s + b: each a from the point where its symbol alone moved.
  {
    std::map<std::string, int64_t> a;
    bool ok = true;
    for (const auto& [s, h] : p0) {
      a[s] = 0;
      for (size_t i = 1; i < points_.size() && ok; ++i) {
        bool alone = points_[i].at(s) != h;
        for (const auto& [t, v] : points_[i])
          if (t != s && v != p0.at(t)) alone = false;
        if (!alone) continue;
        const int64_t dv = trace[i] - trace[0], ds = points_[i].at(s) - h;
        if (dv % ds != 0) ok = false;
        else a[s] = dv / ds;
        break;
      }
    }
    int64_t b = trace[0];
    for (const auto& [s, h] : p0) b -= a[s] * h;
    auto linear = [&](const SymbolValues& p) {
      int64_t v = b;
      for (const auto& [s, k] : a) v += k * p.at(s);
      return v;
    };
    if (ok && fits(linear)) {
      std::vector<std::string> terms;
      for (const auto& [s, k] : a)
        if (k != 0) terms.push_back(k == 1 ? symbol(s) : "Mul(" + integerText(k) + ", " + symbol(s) + ")");
      if (b != 0) terms.push_back(integerText(b));
      if (terms.size() == 1) return terms[0];
      std::string out = "Add(";
      for (size_t i = 0; i < terms.size(); ++i) out += (i ? ", " : "") + terms[i];
      return out + ")";
    }
  }
  // c * E and c * E1 * E2 for expressions the program wrote (a channels-last
  // stride: channels times a width the program computes).
  auto ratioTo = [&](const std::vector<const SizeTrace*>& factors) -> std::optional<int64_t> {
    std::optional<int64_t> c;
    for (size_t i = 0; i < trace.size(); ++i) {
      int64_t p = 1;
      for (const SizeTrace* f : factors) p *= (*f)[i];
      if (p == 0 || trace[i] % p != 0) return std::nullopt;
      if (c && *c != trace[i] / p) return std::nullopt;
      c = trace[i] / p;
    }
    return c;
  };
  auto scaled = [](int64_t c, const std::string& inner) {
    return c == 1 ? inner : "Mul(" + integerText(c) + ", " + inner + ")";
  };
  for (const auto& [t1, e1] : known_)
    if (auto c = ratioTo({&t1})) return scaled(*c, e1);
  for (auto a = known_.begin(); a != known_.end(); ++a)
    for (auto b = a; b != known_.end(); ++b)
      if (auto c = ratioTo({&a->first, &b->first})) return scaled(*c, "Mul(" + a->second + ", " + b->second + ")");
  // c * (a product of two or more symbols).
  std::vector<std::string> syms;
  for (const auto& [s, h] : p0) syms.push_back(s);
  for (uint32_t mask = 1; mask < (1u << std::min<size_t>(syms.size(), 8)); ++mask) {
    if (__builtin_popcount(mask) < 2) continue;
    auto product = [&](const SymbolValues& p) {
      int64_t v = 1;
      for (size_t k = 0; k < syms.size(); ++k)
        if (mask & (1u << k)) v *= p.at(syms[k]);
      return v;
    };
    const int64_t denominator = product(p0);
    if (denominator == 0 || trace[0] % denominator != 0) continue;
    const int64_t c = trace[0] / denominator;
    if (c == 0 || !fits([&](const SymbolValues& p) { return c * product(p); })) continue;
    std::string out = "Mul(" + (c == 1 ? std::string() : integerText(c) + ", ");
    bool first = c == 1;
    for (size_t k = 0; k < syms.size(); ++k)
      if (mask & (1u << k)) {
        out += (first ? "" : ", ") + symbol(syms[k]);
        first = false;
      }
    return out + ")";
  }
  return std::nullopt;
}

}  // namespace ptopt::ir
