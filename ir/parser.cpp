// Text parser for the IR (the format is described in text.h). Line based:
// indentation opens nested blocks, each line is lexed on its own.
#include "ir/text.h"

#include <torch/csrc/jit/runtime/operator.h>

#include <cctype>
#include <set>
#include <unordered_map>

namespace ptopt::ir {
namespace {

std::string formatParseError(const std::string& msg, size_t line, size_t column,
                             const std::string& text) {
  std::string out = "line " + std::to_string(line) + ", column " + std::to_string(column) +
                    ": " + msg;
  if (!text.empty()) out += "\n  " + text + "\n  " + std::string(column ? column - 1 : 0, ' ') + "^";
  return out;
}

enum class Tok { Ident, ValueRef, String, Int, Float, Punct, End };

struct Token {
  Tok kind;
  std::string text;  // identifier, value name (without %), string contents, punct
  size_t column;     // 1-based
};

// Operators TorchScript handles without a registered schema.
const std::set<std::string>& schemalessOps() {
  static const std::set<std::string> ops = {
      "prim::If", "prim::Loop", "prim::ListConstruct", "prim::ListUnpack",
      "prim::TupleConstruct", "prim::TupleUnpack", "prim::TupleIndex", "prim::TupleSlice",
      "prim::DictConstruct", "prim::Uninitialized", "prim::unchecked_cast",
      "prim::RaiseException", "prim::CreateObject", "prim::GetAttr", "prim::SetAttr",
      "prim::isinstance", "prim::Enter", "prim::Exit", "prim::fork", "prim::CallFunction",
      "prim::CallMethod", "prim::Constant", "prim::MMTreeReduce", "prim::ConstantChunk",
      "prim::EnumName", "prim::EnumValue", "prim::Closure", "prim::AutogradZero",
      "prim::BroadcastSizes", "prim::ChunkSizes", "prim::Print", "aten::wait",
      "prim::awaitable", "prim::IgnoredPythonOp", "prim::PythonOp"};
  return ops;
}

class LineLexer {
 public:
  LineLexer(const std::string& text, size_t lineNo, size_t startColumn)
      : text_(text), line_(lineNo), pos_(startColumn) {}

  const Token& peek() {
    if (!peeked_) { next_ = lex(); peeked_ = true; }
    return next_;
  }
  Token take() { peek(); peeked_ = false; return next_; }
  bool takeIf(const char* punct) {
    const Token& t = peek();
    if (t.kind == Tok::Punct && t.text == punct) { take(); return true; }
    return false;
  }
  Token expect(const char* punct) {
    Token t = take();
    if (t.kind != Tok::Punct || t.text != punct) fail(t, std::string("expected '") + punct + "'");
    return t;
  }
  Token expectIdent(const char* what) {
    Token t = take();
    if (t.kind != Tok::Ident) fail(t, std::string("expected ") + what);
    return t;
  }
  void expectEnd() {
    Token t = take();
    if (t.kind != Tok::End) fail(t, "unexpected '" + t.text + "' at the end of the line");
  }
  [[noreturn]] void fail(const Token& t, const std::string& msg) const {
    throw ParseError(msg, line_, t.column, text_);
  }

 private:
  static bool identStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
  static bool identChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }
  static bool nameChar(char c) { return identChar(c); }

  Token lex() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    const size_t col = pos_ + 1;
    if (pos_ >= text_.size() || text_[pos_] == '#') return {Tok::End, "end of line", col};
    const char c = text_[pos_];
    if (c == '%') {
      size_t start = ++pos_;
      while (pos_ < text_.size() && nameChar(text_[pos_])) ++pos_;
      if (pos_ == start) throw ParseError("expected a value name after '%'", line_, col, text_);
      return {Tok::ValueRef, text_.substr(start, pos_ - start), col};
    }
    if (c == '"') return lexString(col);
    const bool negative = c == '-' && pos_ + 1 < text_.size() &&
                          (std::isdigit(static_cast<unsigned char>(text_[pos_ + 1])) ||
                           text_.compare(pos_ + 1, 3, "inf") == 0);
    if (std::isdigit(static_cast<unsigned char>(c)) || negative) return lexNumber(col);
    if (identStart(c)) {
      size_t start = pos_;
      while (pos_ < text_.size()) {
        if (identChar(text_[pos_])) { ++pos_; continue; }
        // `aten::add` and `cuda:0` keep their colons.
        if (text_[pos_] == ':' && pos_ + 1 < text_.size() &&
            (text_[pos_ + 1] == ':' || std::isdigit(static_cast<unsigned char>(text_[pos_ + 1])))) {
          pos_ += text_[pos_ + 1] == ':' ? 2 : 1;
          continue;
        }
        break;
      }
      std::string word = text_.substr(start, pos_ - start);
      if (word == "inf" || word == "nan") return {Tok::Float, word, col};
      return {Tok::Ident, word, col};
    }
    static const std::string kPunct = "()[]{},=:";
    if (kPunct.find(c) != std::string::npos) { ++pos_; return {Tok::Punct, std::string(1, c), col}; }
    throw ParseError(std::string("unexpected character '") + c + "'", line_, col, text_);
  }

  Token lexString(size_t col) {
    std::string out;
    ++pos_;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (c == '\\' && pos_ < text_.size()) {
        char e = text_[pos_++];
        c = e == 'n' ? '\n' : e == 't' ? '\t' : e;
      }
      out += c;
    }
    if (pos_ >= text_.size()) throw ParseError("unterminated string", line_, col, text_);
    ++pos_;
    return {Tok::String, out, col};
  }

  Token lexNumber(size_t col) {
    size_t start = pos_;
    if (text_[pos_] == '-') ++pos_;
    if (text_.compare(pos_, 3, "inf") == 0) { pos_ += 3; return {Tok::Float, "-inf", col}; }
    bool isFloat = false;
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (std::isdigit(static_cast<unsigned char>(c))) { ++pos_; continue; }
      if (c == '.' || c == 'e' || c == 'E') {
        isFloat = true;
        ++pos_;
        if ((c == 'e' || c == 'E') && pos_ < text_.size() && (text_[pos_] == '-' || text_[pos_] == '+')) ++pos_;
        continue;
      }
      break;
    }
    return {isFloat ? Tok::Float : Tok::Int, text_.substr(start, pos_ - start), col};
  }

  const std::string& text_;
  size_t line_;
  size_t pos_;
  bool peeked_ = false;
  Token next_;
};

// Type annotations, over the same lexer.
// Nesting deeper than this is not a real type; recursion without a bound
// would overflow the stack on a long enough line.
constexpr int kMaxTypeDepth = 64;

c10::TypePtr parseTypeTokens(LineLexer& lx, const std::map<std::string, c10::TypePtr>& named, int depth = 0) {
  Token name = lx.take();
  if (depth > kMaxTypeDepth) lx.fail(name, "type nested more than " + std::to_string(kMaxTypeDepth) + " deep");
  if (name.kind == Tok::Ident && name.text == "None") return c10::NoneType::get();
  if (name.kind != Tok::Ident) lx.fail(name, "expected a type");
  static const std::unordered_map<std::string, c10::TypePtr> simple = {
      {"Tensor", c10::TensorType::get()},   {"int", c10::IntType::get()},
      {"float", c10::FloatType::get()},     {"bool", c10::BoolType::get()},
      {"str", c10::StringType::get()},      {"NoneType", c10::NoneType::get()},
      {"Device", c10::DeviceObjType::get()}, {"Any", c10::AnyType::get()},
      {"number", c10::NumberType::get()},   {"Scalar", c10::NumberType::get()},
      {"complex", c10::ComplexType::get()}, {"Generator", c10::GeneratorType::get()},
      {"Storage", c10::StorageType::get()}, {"ScalarType", c10::IntType::get()},
      {"Layout", c10::IntType::get()},      {"MemoryFormat", c10::IntType::get()},
      {"Stream", c10::StreamObjType::get()}, {"Capsule", c10::CapsuleType::get()},
  };
  if (auto it = simple.find(name.text); it != simple.end()) return it->second;
  auto found = named.find(name.text);
  if (found != named.end()) return found->second;
  if (!lx.takeIf("[")) lx.fail(name, "unknown type '" + name.text + "'");
  std::vector<c10::TypePtr> params;
  if (name.text == "Tuple" && lx.takeIf("(")) {
    lx.expect(")");  // Tuple[()]
  } else {
    do params.push_back(parseTypeTokens(lx, named, depth + 1)); while (lx.takeIf(","));
  }
  lx.expect("]");
  auto arity = [&](size_t n) {
    if (params.size() != n) lx.fail(name, name.text + " takes " + std::to_string(n) + " type(s)");
  };
  // c10 refuses some combinations (a Dict keyed by a list): a parse error too.
  try {
    if (name.text == "List") { arity(1); return c10::ListType::create(params[0]); }
    if (name.text == "Optional") { arity(1); return c10::OptionalType::create(params[0]); }
    if (name.text == "Future") { arity(1); return c10::FutureType::create(params[0]); }
    if (name.text == "Dict") { arity(2); return c10::DictType::create(params[0], params[1]); }
    if (name.text == "Tuple") return c10::TupleType::create(params);
    if (name.text == "Union") return c10::UnionType::create(params);
  } catch (const c10::Error& e) {
    lx.fail(name, e.what_without_backtrace());
  }
  lx.fail(name, "unknown type '" + name.text + "'");
}

class Parser {
 public:
  Parser(const std::string& text, const ParseOptions& opts) : opts_(opts) {
    size_t start = 0, lineNo = 1;
    while (start <= text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      std::string line = text.substr(start, end - start);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      size_t indent = line.find_first_not_of(' ');
      if (indent != std::string::npos && line[indent] != '#')
        lines_.push_back({lineNo, indent, std::move(line)});
      start = end + 1;
      ++lineNo;
    }
  }

  std::unique_ptr<Graph> parse() {
    graph_ = std::make_unique<Graph>(opts_.constants);
    graph_->namedTypes() = opts_.namedTypes;
    if (lines_.empty()) throw ParseError("empty input: expected 'graph(...):'", 1, 1, "");
    parseHeader(lines_[0]);
    size_t i = 1;
    parseBlockBody(*graph_->block(), lines_[0].indent + 2, i);
    if (i < lines_.size()) failLine(lines_[i], "unexpected indentation");
    return std::move(graph_);
  }

 private:
  struct Line {
    size_t number;
    size_t indent;
    std::string text;
  };

  [[noreturn]] void failLine(const Line& l, const std::string& msg) {
    throw ParseError(msg, l.number, l.indent + 1, l.text);
  }

  void parseHeader(const Line& l) {
    LineLexer lx(l.text, l.number, l.indent);
    Token kw = lx.expectIdent("'graph'");
    if (kw.text != "graph") lx.fail(kw, "expected 'graph'");
    lx.expect("(");
    if (!lx.takeIf(")")) {
      do {
        auto [name, type, meta, tok] = parseValueDecl(lx);
        Value* v = graph_->addInput(type, name);
        v->meta() = meta;
        define(v, name, tok, lx);
      } while (lx.takeIf(","));
      lx.expect(")");
    }
    lx.expect(":");
    lx.expectEnd();
  }

  struct Decl {
    std::string name;
    c10::TypePtr type;
    TensorMeta meta;
    Token token;
  };

  Decl parseValueDecl(LineLexer& lx) {
    Token ref = lx.take();
    if (ref.kind != Tok::ValueRef) lx.fail(ref, "expected a value like '%x'");
    lx.expect(":");
    Decl d{ref.text, parseTypeTokens(lx, graph_->namedTypes()), {}, ref};
    if (lx.takeIf("{")) d.meta = parseMeta(lx);
    return d;
  }

  TensorMeta parseMeta(LineLexer& lx) {
    TensorMeta m;
    if (lx.takeIf("}")) return m;
    do {
      Token t = lx.peek();
      if (t.kind == Tok::Punct && t.text == "[") {
        lx.take();
        std::vector<int64_t> shape;
        if (!lx.takeIf("]")) {
          do {
            Token n = lx.take();
            if (n.kind != Tok::Int) lx.fail(n, "expected an integer dimension");
            shape.push_back(intOf(lx, n));
          } while (lx.takeIf(","));
          lx.expect("]");
        }
        m.shape = shape;
        continue;
      }
      lx.take();
      if (t.kind != Tok::Ident) lx.fail(t, "expected dtype, shape, memory format or device");
      if (auto dt = dtypeFromName(t.text)) m.dtype = *dt;
      else if (auto mf = memoryFormatFromName(t.text)) m.memoryFormat = *mf;
      else {
        try {
          m.device = c10::Device(t.text);
        } catch (const std::exception&) {
          lx.fail(t, "unknown metadata '" + t.text + "' (expected a dtype, memory format or device)");
        }
      }
    } while (lx.takeIf(","));
    lx.expect("}");
    return m;
  }

  void define(Value* v, const std::string& requested, const Token& tok, LineLexer& lx) {
    if (v->name() != requested) lx.fail(tok, "value %" + requested + " is defined twice");
    visible_.insert(v);  // graph inputs: visible everywhere
  }

  Value* lookup(const Token& t, LineLexer& lx) {
    Value* v = graph_->findValue(t.text);
    if (!v || !visible_.count(v)) lx.fail(t, "use of undefined value %" + t.text);
    return v;
  }

  void parseBlockBody(Block& b, size_t indent, size_t& i) {
    scope_.emplace_back();
    for (const auto& p : b.params()) visible_.insert(p.get());
    bool sawOutput = false;
    while (i < lines_.size() && lines_[i].indent == indent) {
      const Line& l = lines_[i++];
      if (sawOutput) failLine(l, "statement after 'output(...)': output must end its block");
      Node* n = parseStatement(b, l);
      if (n->opcode() == Opcode::Output) { sawOutput = true; continue; }
      // Nested blocks follow at indent + 2.
      while (i < lines_.size() && lines_[i].indent == indent + 2) {
        const Line& bl = lines_[i++];
        LineLexer lx(bl.text, bl.number, bl.indent);
        Token kw = lx.expectIdent("'blockN(...):'");
        if (kw.text.rfind("block", 0) != 0) lx.fail(kw, "expected 'blockN(...):'");
        Block* nested = n->addBlock();
        lx.expect("(");
        std::vector<std::pair<Value*, Token>> params;
        if (!lx.takeIf(")")) {
          do {
            auto d = parseValueDecl(lx);
            Value* p = nested->addParam(d.type, d.name);
            p->meta() = d.meta;
            if (p->name() != d.name) lx.fail(d.token, "value %" + d.name + " is defined twice");
            params.push_back({p, d.token});
          } while (lx.takeIf(","));
          lx.expect(")");
        }
        lx.expect(":");
        lx.expectEnd();
        parseBlockBody(*nested, indent + 4, i);
        for (auto& [p, tok] : params) { (void)tok; visible_.erase(p); }
      }
      for (const auto& out : n->outputs()) visible_.insert(out.get());
    }
    if (!sawOutput) {
      const Line& where = lines_[i ? i - 1 : 0];
      throw ParseError("block does not end with 'output(...)'", where.number, where.indent + 1, where.text);
    }
    // Values defined in this block go out of scope.
    for (const auto& name : scope_.back())
      if (Value* v = graph_->findValue(name)) visible_.erase(v);
    scope_.pop_back();
  }

  Node* parseStatement(Block& b, const Line& l) {
    LineLexer lx(l.text, l.number, l.indent);
    std::vector<Decl> outs;
    if (lx.peek().kind == Tok::ValueRef) {
      do outs.push_back(parseValueDecl(lx)); while (lx.takeIf(","));
      lx.expect("=");
    }
    Token op = lx.expectIdent("an operator, 'get_attr' or 'output'");
    Node* n = nullptr;
    if (op.text == "output") {
      if (!outs.empty()) lx.fail(op, "'output' has no results");
      n = b.outputNode();
      parseArgs(lx, n);
      lx.expectEnd();
      return n;
    }
    if (op.text == "get_attr") {
      lx.expect("[");
      Token name = lx.take();
      if (name.kind != Tok::String) lx.fail(name, "expected the constant name as a string");
      lx.expect("]");
      if (lx.takeIf("(")) lx.expect(")");
      if (outs.size() != 1) lx.fail(op, "get_attr has exactly one result");
      if (opts_.constants && !opts_.constants->contains(name.text))
        lx.fail(name, "unknown constant \"" + name.text + "\"");
      n = graph_->createNode(Opcode::GetAttr, name.text);
    } else {
      auto [target, overload] = splitQualifiedTarget(op.text);
      if (target.find("::") == std::string::npos)
        lx.fail(op, "expected a namespaced operator like aten::relu, got '" + op.text + "'");
      n = graph_->createNode(Opcode::CallFunction, target, overload);
      n->setSchema(findSchema(target, overload));
      if (!n->schema() && opts_.requireKnownOperators && !schemalessOps().count(target)) {
        const auto ops = torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString(target));
        if (ops.empty()) lx.fail(op, "unknown operator '" + target + "'");
        std::string known;
        for (const auto& o : ops)
          known += (known.empty() ? "" : ", ") + std::string(o->schema().overload_name().empty() ? "(none)" : o->schema().overload_name());
        lx.fail(op, "operator '" + target + "' has no overload '" + overload + "' (known: " + known + ")");
      }
      if (lx.takeIf("[")) {
        do {
          Token key = lx.expectIdent("an attribute name");
          lx.expect("=");
          n->setAttr(key.text, parseAttrValue(lx));
        } while (lx.takeIf(","));
        lx.expect("]");
      }
      parseArgs(lx, n);
    }
    lx.expectEnd();
    for (auto& d : outs) {
      Value* v = n->addOutput(d.type, d.name);
      v->meta() = d.meta;
      if (v->name() != d.name) {
        n->removeAllArgs();
        lx.fail(d.token, "value %" + d.name + " is defined twice");
      }
      scope_.back().push_back(d.name);
    }
    Builder(&b).insert(n);
    return n;
  }

  void parseArgs(LineLexer& lx, Node* n) {
    lx.expect("(");
    if (lx.takeIf(")")) return;
    do {
      if (lx.peek().kind == Tok::ValueRef) n->addArg(lookup(lx.take(), lx));
      else n->addArg(parseLiteral(lx));
    } while (lx.takeIf(","));
    lx.expect(")");
  }

  AttrValue parseAttrValue(LineLexer& lx) {
    const Token& t = lx.peek();
    if (t.kind == Tok::Ident && (t.text == "type" || t.text == "types")) {
      TypesAttr types{{}, lx.take().text == "types"};
      lx.expect("(");
      if (!lx.takeIf(")")) {
        do types.types.push_back(parseTypeTokens(lx, graph_->namedTypes())); while (lx.takeIf(","));
        lx.expect(")");
      }
      return types;
    }
    return parseLiteral(lx);
  }

  // Literals out of range are parse errors (std::stoll would throw
  // std::out_of_range; found by tests/fuzz/ir_text_fuzz).
  static int64_t intOf(LineLexer& lx, const Token& t) {
    try {
      return static_cast<int64_t>(std::stoll(t.text));
    } catch (const std::exception&) {
      lx.fail(t, "integer literal out of the 64-bit range");
    }
  }
  static double doubleOf(LineLexer& lx, const Token& t) {
    try {
      return std::stod(t.text);
    } catch (const std::exception&) {
      lx.fail(t, "float literal out of the double range");
    }
  }

  Literal parseScalar(LineLexer& lx, const Token& t) {
    switch (t.kind) {
      case Tok::Int: return Literal(intOf(lx, t));
      case Tok::Float: return Literal(doubleOf(lx, t));
      case Tok::String: return Literal(t.text);
      case Tok::Ident:
        if (t.text == "None") return Literal(NoneLiteral{});
        if (t.text == "True") return Literal(true);
        if (t.text == "False") return Literal(false);
        break;
      default: break;
    }
    lx.fail(t, "expected a literal or a value, got '" + t.text + "'");
  }

  Literal parseLiteral(LineLexer& lx) {
    Token t = lx.take();
    if (t.kind == Tok::Punct && t.text == "[") return parseList(lx, t);
    if (t.kind == Tok::Ident) {
      if (t.text == "int" || t.text == "float" || t.text == "bool" || t.text == "str") {
        lx.expect("[");
        lx.expect("]");
        if (t.text == "int") return Literal(std::vector<int64_t>{});
        if (t.text == "float") return Literal(std::vector<double>{});
        if (t.text == "bool") return Literal(std::vector<bool>{});
        return Literal(std::vector<std::string>{});
      }
      if (t.text == "device") {
        lx.expect("(");
        Token s = lx.take();
        if (s.kind != Tok::String) lx.fail(s, "expected a device string like \"cpu\"");
        lx.expect(")");
        try {
          return Literal(c10::Device(s.text));
        } catch (const std::exception&) {
          lx.fail(s, "invalid device \"" + s.text + "\"");
        }
      }
      if (t.text.rfind("torch.", 0) == 0) {
        const std::string rest = t.text.substr(6);
        if (auto dt = dtypeFromName(rest)) return Literal(*dt);
        if (auto mf = memoryFormatFromName(rest)) return Literal(*mf);
        if (auto lay = layoutFromName(rest)) return Literal(*lay);
        lx.fail(t, "unknown torch constant '" + t.text + "'");
      }
    }
    return parseScalar(lx, t);
  }

  Literal parseList(LineLexer& lx, const Token& open) {
    std::vector<Literal> items;
    if (!lx.takeIf("]")) {
      do items.push_back(parseScalar(lx, lx.take())); while (lx.takeIf(","));
      lx.expect("]");
    }
    if (items.empty()) lx.fail(open, "write an empty list with its type: int[], float[], bool[] or str[]");
    auto all = [&](auto pred) { return std::all_of(items.begin(), items.end(), pred); };
    if (all([](const Literal& l) { return l.is<int64_t>(); })) {
      std::vector<int64_t> v;
      for (auto& l : items) v.push_back(l.as<int64_t>());
      return Literal(std::move(v));
    }
    if (all([](const Literal& l) { return l.is<double>(); })) {
      std::vector<double> v;
      for (auto& l : items) v.push_back(l.as<double>());
      return Literal(std::move(v));
    }
    if (all([](const Literal& l) { return l.is<bool>(); })) {
      std::vector<bool> v;
      for (auto& l : items) v.push_back(l.as<bool>());
      return Literal(std::move(v));
    }
    if (all([](const Literal& l) { return l.is<std::string>(); })) {
      std::vector<std::string> v;
      for (auto& l : items) v.push_back(l.as<std::string>());
      return Literal(std::move(v));
    }
    lx.fail(open, "a list literal holds one kind of element (int, float, bool or str)");
  }

  const ParseOptions& opts_;
  std::vector<Line> lines_;
  std::unique_ptr<Graph> graph_;
  std::vector<std::vector<std::string>> scope_;
  std::set<Value*> visible_;
};

}  // namespace

ParseError::ParseError(const std::string& msg, size_t line, size_t column, const std::string& lineText)
    : std::runtime_error(formatParseError(msg, line, column, lineText)),
      line_(line), column_(column), message_(msg) {}

std::unique_ptr<Graph> parseGraph(const std::string& text, const ParseOptions& options) {
  return Parser(text, options).parse();
}

c10::TypePtr parseType(const std::string& text, const std::map<std::string, c10::TypePtr>& namedTypes) {
  LineLexer lx(text, 1, 0);
  auto t = parseTypeTokens(lx, namedTypes);
  lx.expectEnd();
  return t;
}

}  // namespace ptopt::ir
