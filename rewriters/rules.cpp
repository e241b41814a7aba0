#include "rewriters/rules.h"

#include "ir/text.h"

#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

namespace ptopt::rewriters {

namespace {

bool isNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; }

// One `where` clause, compiled into a Constraint.
struct WhereClause {
  enum class Kind { In, NotIn, IsLiteral, IsValue, IsConstant };
  size_t wildcard = 0;
  std::string name;  // the wildcard, without '%'
  Kind kind = Kind::In;
  std::vector<ir::Literal> set;
  std::string text;  // the clause as written
  size_t line = 0;

  std::optional<std::string> check(const Match& m) const {
    const ir::Arg& a = m.binding(wildcard);
    auto fail = [&](const std::string& what) {
      return "%" + name + " " + what + ", rejected by '" + text + "' (line " + std::to_string(line) + ")";
    };
    auto inSet = [&] {
      for (const auto& l : set)
        if (l == a.literal()) return true;
      return false;
    };
    switch (kind) {
      case Kind::In:
        if (a.isValue()) return fail("is bound to the value %" + a.value()->name() + ", not a literal");
        if (!inSet()) return fail("is " + a.literal().str());
        return std::nullopt;
      case Kind::NotIn:
        if (a.isLiteral() && inSet()) return fail("is " + a.literal().str());
        return std::nullopt;
      case Kind::IsLiteral:
        if (a.isValue()) return fail("is bound to the value %" + a.value()->name());
        return std::nullopt;
      case Kind::IsValue:
        if (a.isLiteral()) return fail("is bound to the literal " + a.literal().str());
        return std::nullopt;
      case Kind::IsConstant: {
        const ir::Value* v = a.value();
        if (!v) return fail("is bound to the literal " + a.literal().str());
        if (!v->node() || v->node()->opcode() != ir::Opcode::GetAttr)
          return fail("is bound to %" + v->name() + ", which is not a constant (get_attr)");
        return std::nullopt;
      }
    }
    return std::nullopt;
  }
};

class RuleParser {
 public:
  RuleParser(const std::string& text, std::string source) : source_(std::move(source)) {
    std::string line;
    std::istringstream in(text);
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines_.push_back(line);
    }
  }

  std::vector<RewriteRule> parse() {
    std::vector<RewriteRule> rules;
    std::set<std::string> names;
    size_t i = 0;
    while (i < lines_.size()) {
      if (skippable(i)) { ++i; continue; }
      checkNoTabs(i);
      if (indentOf(i) != 0) fail(i, indentOf(i) + 1, "expected 'rule NAME' at the start of the line");
      rules.push_back(parseRule(i, names));
    }
    return rules;
  }

 private:
  struct Section {
    size_t keywordLine = 0;  // 0-based line of the keyword
    size_t first = 0, end = 0;  // graph lines [first, end)
    bool present = false;
  };

  [[noreturn]] void fail(size_t line, size_t column, const std::string& msg) const {
    throw RuleFileError(msg, line + 1, column, line < lines_.size() ? lines_[line] : "", source_);
  }

  void checkNoTabs(size_t i) const {
    const size_t text = lines_[i].find_first_not_of(" \t");
    const size_t tab = lines_[i].find('\t');
    if (tab < text) fail(i, tab + 1, "indent with spaces, not tabs");
  }

  size_t indentOf(size_t i) const {
    size_t n = lines_[i].find_first_not_of(' ');
    return n == std::string::npos ? lines_[i].size() : n;
  }
  bool skippable(size_t i) const {
    const size_t n = lines_[i].find_first_not_of(" \t");
    return n == std::string::npos || lines_[i][n] == '#';
  }

  // Words of a keyword line up to a '#' comment, with their 1-based columns.
  std::vector<std::pair<std::string, size_t>> words(size_t i, size_t from = 0, size_t to = std::string::npos) const {
    std::vector<std::pair<std::string, size_t>> out;
    const std::string& s = lines_[i];
    to = std::min(to, s.size());
    size_t p = from;
    while (p < to) {
      if (s[p] == ' ' || s[p] == '\t') { ++p; continue; }
      if (s[p] == '#') break;
      size_t start = p;
      while (p < to && s[p] != ' ' && s[p] != '\t' && s[p] != '#') ++p;
      out.emplace_back(s.substr(start, p - start), start + 1);
    }
    return out;
  }

  RewriteRule parseRule(size_t& i, std::set<std::string>& names) {
    const size_t ruleLine = i;
    auto w = words(i);
    if (w[0].first != "rule") fail(i, 1, "expected 'rule NAME', got '" + w[0].first + "'");
    if (w.size() < 2) fail(i, lines_[i].size() + 1, "expected a rule name after 'rule'");
    const auto& [name, nameCol] = w[1];
    for (size_t k = 0; k < name.size(); ++k)
      if (!isNameChar(name[k]))
        fail(i, nameCol + k, "a rule name holds letters, digits, '-', '_' and '.' only");
    if (w.size() > 2) fail(i, w[2].second, "unexpected '" + w[2].first + "' after the rule name");
    if (!names.insert(name).second) fail(i, nameCol, "rule '" + name + "' is defined twice");
    ++i;

    Section pattern, replacement;
    std::vector<size_t> whereLines;
    while (i < lines_.size()) {
      if (skippable(i)) { ++i; continue; }
      checkNoTabs(i);
      const size_t indent = indentOf(i);
      if (indent == 0) break;  // the next rule
      auto kw = words(i);
      const std::string& k = kw[0].first;
      if (k == "pattern" || k == "replacement") {
        Section& s = k == "pattern" ? pattern : replacement;
        if (s.present) fail(i, indent + 1, "rule '" + name + "' has two '" + k + "' sections");
        if (kw.size() > 1)
          fail(i, kw[1].second, "unexpected '" + kw[1].first + "': the graph goes on the next lines, indented");
        s.present = true;
        s.keywordLine = i;
        s.first = ++i;
        while (i < lines_.size() && (skippable(i) || indentOf(i) > indent)) {
          if (!skippable(i)) checkNoTabs(i);
          ++i;
        }
        s.end = i;
        while (s.end > s.first && skippable(s.end - 1)) --s.end;
        if (s.end == s.first)
          fail(s.keywordLine, indent + 1, "expected a graph(...) indented under '" + k + "'");
        continue;
      }
      if (k == "where") {
        whereLines.push_back(i++);
        continue;
      }
      fail(i, indent + 1, "expected 'pattern', 'replacement' or 'where', got '" + k + "'");
    }
    if (!pattern.present) fail(ruleLine, 1, "rule '" + name + "' has no 'pattern' section");
    if (!replacement.present) fail(ruleLine, 1, "rule '" + name + "' has no 'replacement' section");

    RewriteRule rule;
    rule.name = name;
    auto patternGraph = parseSection(pattern);
    try {
      rule.pattern = std::make_shared<const Pattern>(std::move(patternGraph));
    } catch (const std::invalid_argument& e) {
      fail(headerLine(pattern), indentOf(headerLine(pattern)) + 1, e.what());
    }
    rule.replacement = parseSection(replacement);
    try {
      checkReplacement(*rule.pattern, *rule.replacement);
    } catch (const std::invalid_argument& e) {
      fail(headerLine(replacement), indentOf(headerLine(replacement)) + 1, e.what());
    }
    for (size_t wl : whereLines) {
      auto clause = std::make_shared<const WhereClause>(parseWhere(wl, *rule.pattern));
      rule.constraints.push_back([clause](const Match& m) { return clause->check(m); });
    }
    return rule;
  }

  size_t headerLine(const Section& s) const {
    size_t i = s.first;
    while (skippable(i)) ++i;
    return i;
  }

  // The section's lines keep their file line numbers and columns (other
  // lines are blanked), so IR parse errors point into the file directly.
  std::unique_ptr<ir::Graph> parseSection(const Section& s) const {
    std::string text;
    for (size_t k = 0; k < s.end; ++k) {
      if (k >= s.first) text += lines_[k];
      text += '\n';
    }
    try {
      return ir::parseGraph(text);
    } catch (const ir::ParseError& e) {
      fail(e.line() - 1, e.column(), e.message());
    }
  }

  WhereClause parseWhere(size_t i, const Pattern& pattern) const {
    const std::string& s = lines_[i];
    WhereClause c;
    c.line = i + 1;
    size_t brace = s.find('{');
    if (s.find('#') < brace) brace = std::string::npos;  // a '{' in a comment
    auto w = words(i, 0, brace);
    // w[0] is 'where'.
    if (w.size() < 2) fail(i, s.size() + 1, "expected '%name' after 'where'");
    const auto& [ref, refCol] = w[1];
    if (ref.size() < 2 || ref[0] != '%') fail(i, refCol, "expected a pattern input like '%x' after 'where'");
    c.name = ref.substr(1);
    auto idx = pattern.wildcardIndex(c.name);
    if (!idx) {
      std::string known;
      for (const auto* v : pattern.wildcards()) known += (known.empty() ? "%" : ", %") + v->name();
      fail(i, refCol, "unknown wildcard %" + c.name + " (the pattern's inputs: " + known + ")");
    }
    c.wildcard = *idx;
    size_t end = s.size();  // where the clause text ends (before a comment)
    if (w.size() >= 3 && w[2].first == "is") {
      if (brace != std::string::npos) fail(i, brace + 1, "unexpected '{' in an 'is' clause");
      if (w.size() < 4) fail(i, s.size() + 1, "expected literal, value or constant after 'is'");
      const auto& [kind, kindCol] = w[3];
      if (kind == "literal") c.kind = WhereClause::Kind::IsLiteral;
      else if (kind == "value") c.kind = WhereClause::Kind::IsValue;
      else if (kind == "constant") c.kind = WhereClause::Kind::IsConstant;
      else fail(i, kindCol, "expected literal, value or constant after 'is', got '" + kind + "'");
      if (w.size() > 4) fail(i, w[4].second, "unexpected '" + w[4].first + "'");
      end = w[3].second - 1 + kind.size();
    } else {
      size_t next = 2;
      if (w.size() > next && w[next].first == "not") {
        c.kind = WhereClause::Kind::NotIn;
        ++next;
      }
      if (w.size() <= next || w[next].first != "in")
        fail(i, w.size() > next ? w[next].second : s.size() + 1, "expected 'in {...}', 'not in {...}' or 'is ...'");
      if (w.size() > next + 1) fail(i, w[next + 1].second, "expected '{' after 'in'");
      if (brace == std::string::npos) fail(i, s.size() + 1, "expected '{' after 'in'");
      const size_t close = closingBrace(s, brace);
      if (close == std::string::npos) fail(i, brace + 1, "unterminated '{': expected '}'");
      auto rest = words(i, close + 1);
      if (!rest.empty()) fail(i, rest[0].second, "unexpected '" + rest[0].first + "' after '}'");
      c.set = parseLiterals(i, brace + 1, close);
      end = close + 1;
    }
    c.text = s.substr(indentOf(i), end - indentOf(i));
    return c;
  }

  // The '}' closing the '{' at `open`, skipping string literals.
  static size_t closingBrace(const std::string& s, size_t open) {
    bool quoted = false;
    for (size_t p = open + 1; p < s.size(); ++p) {
      if (quoted) {
        if (s[p] == '\\') ++p;
        else if (s[p] == '"') quoted = false;
      } else if (s[p] == '"') {
        quoted = true;
      } else if (s[p] == '}') {
        return p;
      }
    }
    return std::string::npos;
  }

  // Literals between columns [from, to) of line i, read by the IR parser as
  // the arguments of a placeholder call; errors map back to the line.
  std::vector<ir::Literal> parseLiterals(size_t i, size_t from, size_t to) const {
    const std::string content = lines_[i].substr(from, to - from);
    if (content.find_first_not_of(" \t") == std::string::npos)
      fail(i, from + 1, "expected at least one literal in { }");
    const std::string prefix = "  where::in(";
    const std::string text = "graph():\n" + prefix + content + ")\n  output()\n";
    ir::ParseOptions opts;
    opts.requireKnownOperators = false;
    std::unique_ptr<ir::Graph> g;
    try {
      g = ir::parseGraph(text, opts);
    } catch (const ir::ParseError& e) {
      size_t col = from + 1;
      if (e.line() == 2 && e.column() > prefix.size())
        col = std::min(from + 1 + (e.column() - prefix.size() - 1), to + 1);
      std::string msg = e.message();
      if (msg.rfind("use of undefined value", 0) == 0) msg = "expected a literal, not a value";
      fail(i, col, msg);
    }
    std::vector<ir::Literal> out;
    for (const ir::Arg& a : g->block()->first()->args()) out.push_back(a.literal());
    return out;
  }

  std::string source_;
  std::vector<std::string> lines_;
};

}  // namespace

std::vector<RewriteRule> parseRules(const std::string& text, const std::string& source) {
  return RuleParser(text, source).parse();
}

std::vector<RewriteRule> loadRuleFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read rule file '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parseRules(ss.str(), path);
}

PassResult RulesPass::run(ir::Graph& graph, PassContext& ctx) {
  const std::string& path = options().getString("file");
  const std::string& textName = options().getString("text");
  if (path.empty() == textName.empty())
    throw PassError("pass 'rules' needs one rule source: rules{file=path/to/file.rules} (or, from the API, text=NAME)");
  auto& cached = cache_[path.empty() ? "text:" + textName : path];
  if (!cached && !path.empty()) cached = std::make_shared<const std::vector<RewriteRule>>(loadRuleFile(path));
  if (!cached) {
    const std::string* text = nullptr;
    if (const RuleTexts* texts = ctx.inputs.find<RuleTexts>())
      if (auto it = texts->byName.find(textName); it != texts->byName.end()) text = &it->second;
    if (!text) throw PassError("pass 'rules': no rule text named '" + textName + "' was handed to this run");
    cached = std::make_shared<const std::vector<RewriteRule>>(parseRules(*text, textName));
  }

  ir::Rewriter rw(graph, ctx.edits, name());
  RewriteOptions opts;
  opts.maxIterations = static_cast<size_t>(options().getInt("max-iter"));
  opts.ctx = &ctx;
  opts.passName = name();
  opts.rewriter = &rw;
  const RewriteStats stats = applyRules(graph, *cached, opts);

  PassResult r;
  r.changed = rw.changed();
  for (size_t k = 0; k < cached->size(); ++k)
    if (stats.perRule[k]) r.count((*cached)[k].name, static_cast<int64_t>(stats.perRule[k]));
  return r;
}

}  // namespace ptopt::rewriters
