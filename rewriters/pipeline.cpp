#include "rewriters/pipeline.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace ptopt::rewriters {

// ---------------------------------------------------------------- presets
//
// One table, and the reason for every ordering constraint beside it.
//
// -O0  nothing: import and export only (bitwise-equal outputs).
// -O1  the default:
//      canonicalize     first, so every later pass sees one form per op
//                       (conv2d, not _convolution; literal lists, not
//                       ListConstruct);
//      remove-dropout   before the folds: a dropout between a conv and its
//                       BatchNorm would hide the pair;
//      bn-inference     before fold-conv-bn, which only folds inference-mode
//                       BatchNorm (models traced in training mode);
//      shape-prop       before the folds that need ranks (fold-linear-bn,
//                       fold-conv-affine with [1, C, 1, 1] constants); it does
//                       nothing without --input-shape;
//      fuse-hardswish   after shape-prop, whose dtypes and ranks it needs:
//                       hardswish / hardsigmoid written as x + 3, clamps and
//                       / 6 (torch.export's inference IR) become one op;
//                       before the folds, which would take a conv's `+ 3`
//                       into its bias and hide the pattern;
//      fixpoint{max-iter=8}(fold-conv-bn, fold-linear-bn, fold-conv-affine,
//                       drop-zero-bias)
//                       the folds repeat until none changes the graph: each
//                       one's result is a conv or linear again, which can
//                       absorb what follows it (conv -> mul -> add -> BN
//                       needs fold-conv-affine before fold-conv-bn, conv ->
//                       BN -> mul -> BN the other way round). BN folds come
//                       first in a round, so a conv -> BN -> mul chain folds
//                       in one; drop-zero-bias after the folds, which create
//                       the biases. The rounds show in the counters;
//      bn-to-affine     after every fold, so only BatchNorms that could not
//                       be absorbed are considered (it declines on CPU);
//      fuse-add-relu    after the folds: an add between conv and relu may be
//                       folded away first;
//      fuse-gelu        after shape-prop, whose dtypes and ranks it needs
//                       (GELU written out in elementwise ops becomes
//                       aten::gelu); before the cleanup, which removes the
//                       constants it leaves unread;
//      canonicalize, const-fold, cse, dce to a fixpoint, last: each can
//                       expose work for the others and the folds leave dead
//                       constants behind; canonicalize again because with
//                       shape-prop's metadata it proves no-ops it could not
//                       before (GhostNet's x[:, :k] of a cat of k channels,
//                       views to the same shape).
// -O2  -O1, then
//      channels-last{mode=auto}
//                       after the folds, so conv weights are folded before
//                       they are stored channels-last (a fold after it would
//                       build new contiguous weights), and after the cleanup
//                       fixpoint: it needs none of its own (it erases the
//                       conversions it collapses and creates no dead code);
//                       it reads -O1's shape-prop metadata (ranks, spatial
//                       sizes for mode=auto) and updates the memory formats.
// -O3  -O2 + cast{dtype=auto}: bf16 on CPU targets, fp16 on CUDA targets
//      (--prefer-bf16 picks bf16 there too);
//      cast             after every fold and the cleanup: it converts the
//                       folded weights offline (converting before folding
//                       would fold in low precision, and a cast between a
//                       conv and its BatchNorm would hide the pair); after
//                       channels-last, so the weights it converts already
//                       have their final layout. It removes the constants
//                       it replaces itself, so no cleanup follows.
// Every preset ends with
//      fuse-cudnn       CUDA targets only (it changes nothing for CPU
//                       targets): conv+add+relu and conv+relu become cuDNN's
//                       fused kernels. Last, so that channels-last and cast
//                       see plain convs and it fuses their final layout and
//                       dtype. Passes added to a pipeline ("-O1,more",
//                       --rules files) run before it (addExtraPasses).
std::string presetPipeline(int level) {
  return level == 0 ? "" : presetPipelineBody(level) + "," + std::string(kTargetPasses);
}

std::string presetPipelineBody(int level) {
  const std::string cleanup = "fixpoint{max-iter=4}(canonicalize,const-fold,cse,dce)";
  switch (level) {
    case 0: return "";
    case 1:
      return "canonicalize,remove-dropout,bn-inference,shape-prop,fuse-hardswish,"
             "fixpoint{max-iter=8}(fold-conv-bn,fold-linear-bn,fold-conv-affine,drop-zero-bias),"
             "bn-to-affine,fuse-add-relu,fuse-gelu," + cleanup;
    case 2: return presetPipelineBody(1) + ",channels-last{mode=auto}";
    case 3: return presetPipelineBody(2) + ",cast{dtype=auto}";
    default: throw std::invalid_argument("no preset -O" + std::to_string(level) + " (use -O0 to -O3)");
  }
}

// ---------------------------------------------------------------- parser

namespace {

class PipelineParser {
 public:
  PipelineParser(const std::string& text, const PassRegistry& registry, const std::string& source)
      : text_(text), registry_(registry), source_(source) {}

  Pipeline parse() {
    Pipeline p;
    skipSpace();
    if (atEnd()) return p;
    p.elements = parseList();
    skipSpace();
    if (!atEnd()) fail(std::string("unexpected '") + text_[pos_] + "'" +
                       (text_[pos_] == ')' ? " (no matching '(')" : ""));
    return p;
  }

 private:
  [[noreturn]] void failAt(size_t pos, const std::string& msg) const {
    size_t line = 1, lineStart = 0;
    for (size_t i = 0; i < pos && i < text_.size(); ++i)
      if (text_[i] == '\n') { ++line; lineStart = i + 1; }
    size_t lineEnd = text_.find('\n', lineStart);
    std::string lineText = text_.substr(lineStart, lineEnd == std::string::npos ? std::string::npos : lineEnd - lineStart);
    throw PipelineError(msg, line, pos - lineStart + 1, lineText, source_);
  }
  [[noreturn]] void fail(const std::string& msg) const { failAt(pos_, msg); }

  bool atEnd() const { return pos_ >= text_.size(); }
  void skipSpace() {
    while (!atEnd()) {
      if (std::isspace(static_cast<unsigned char>(text_[pos_]))) { ++pos_; continue; }
      if (text_[pos_] == '#') { while (!atEnd() && text_[pos_] != '\n') ++pos_; continue; }
      break;
    }
  }
  bool take(char c) {
    skipSpace();
    if (!atEnd() && text_[pos_] == c) { ++pos_; return true; }
    return false;
  }
  void expect(char c, const std::string& context) {
    if (!take(c)) fail(std::string("expected '") + c + "' " + context +
                       (atEnd() ? " but the pipeline ended" : std::string(", got '") + text_[pos_] + "'"));
  }
  static bool nameChar(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  }
  std::string word(const std::string& what) {
    skipSpace();
    size_t start = pos_;
    while (!atEnd() && nameChar(text_[pos_])) ++pos_;
    if (start == pos_) fail("expected " + what + (atEnd() ? " but the pipeline ended" : std::string(", got '") + text_[pos_] + "'"));
    return text_.substr(start, pos_ - start);
  }
  std::string value() {
    skipSpace();
    if (!atEnd() && text_[pos_] == '"') {
      size_t start = pos_++;
      std::string out;
      while (!atEnd() && text_[pos_] != '"') {
        if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;
        out += text_[pos_++];
      }
      if (atEnd()) failAt(start, "unterminated string");
      ++pos_;
      return out;
    }
    size_t start = pos_;
    while (!atEnd() && !std::isspace(static_cast<unsigned char>(text_[pos_])) &&
           std::string(",{}()=#\"").find(text_[pos_]) == std::string::npos)
      ++pos_;
    if (start == pos_) fail("expected an option value");
    return text_.substr(start, pos_ - start);
  }

  std::vector<PipelineElement> parseList() {
    std::vector<PipelineElement> out;
    do out.push_back(parseElement()); while (take(','));
    return out;
  }

  PipelineElement parseElement() {
    skipSpace();
    const size_t start = pos_;
    PipelineElement e;
    e.name = word("a pass name");
    if (!e.isFixpoint() && !registry_.find(e.name)) {
      std::string hint = registry_.suggest(e.name);
      failAt(start, "unknown pass '" + e.name + "'" +
                        (hint.empty() ? " (see 'ptopt passes')" : " (did you mean '" + hint + "'?)"));
    }
    e = withOptionSpecs(std::move(e), registry_);
    const std::vector<OptionSpec>& specs = e.specs;
    std::map<std::string, std::string> given;
    if (take('{')) {
      if (!take('}')) {
        do {
          skipSpace();
          const size_t keyPos = pos_;
          std::string key = word("an option name");
          expect('=', "after option '" + key + "'");
          const size_t valuePos = (skipSpace(), pos_);
          std::string v = value();
          const OptionSpec* spec = nullptr;
          for (const auto& s : specs)
            if (s.name == key) spec = &s;
          if (!spec) {
            std::string known;
            for (const auto& s : specs) known += (known.empty() ? "" : ", ") + s.name;
            failAt(keyPos, "pass '" + e.name + "' has no option '" + key + "'" +
                               (known.empty() ? " (it takes none)" : " (options: " + known + ")"));
          }
          if (given.count(key)) failAt(keyPos, "option '" + key + "' given twice");
          try {
            given[key] = validateOption(*spec, v);
          } catch (const std::invalid_argument& err) {
            failAt(valuePos, err.what());
          }
        } while (take(','));
        expect('}', "to close the options of '" + e.name + "'");
      }
    }
    for (const auto& s : specs)
      if (given.count(s.name)) e.options.emplace_back(s.name, given[s.name]);
    skipSpace();
    const size_t parenPos = pos_;
    if (take('(')) {
      if (!e.isFixpoint()) failAt(parenPos, "only fixpoint{...}(...) takes a nested pipeline");
      // Each level is a recursive call: bound it so a long file cannot overflow the stack.
      if (++depth_ > kMaxNesting) failAt(parenPos, "fixpoint nested more than " + std::to_string(kMaxNesting) + " deep");
      skipSpace();
      if (!atEnd() && text_[pos_] == ')') fail("fixpoint needs at least one pass inside ( )");
      e.children = parseList();
      expect(')', "to close fixpoint(...)");
      --depth_;
    } else if (e.isFixpoint()) {
      fail("fixpoint needs a nested pipeline: fixpoint{max-iter=4}(cse,dce)");
    }
    e.line = 1;
    e.column = start + 1;
    return e;
  }

  static constexpr int kMaxNesting = 32;
  const std::string& text_;
  const PassRegistry& registry_;
  std::string source_;
  size_t pos_ = 0;
  int depth_ = 0;
};

bool needsQuotes(const std::string& v) {
  if (v.empty()) return true;
  for (char c : v)
    if (std::isspace(static_cast<unsigned char>(c)) || std::string(",{}()=#\"").find(c) != std::string::npos)
      return true;
  return false;
}

void printElements(const std::vector<PipelineElement>& elements, std::string& out) {
  for (size_t i = 0; i < elements.size(); ++i) {
    const auto& e = elements[i];
    if (i) out += ",";
    out += e.name;
    if (!e.options.empty()) {
      out += "{";
      for (size_t j = 0; j < e.options.size(); ++j) {
        const auto& [k, v] = e.options[j];
        out += (j ? "," : "") + k + "=";
        if (needsQuotes(v)) {
          out += "\"";
          for (char c : v) out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
          out += "\"";
        } else {
          out += v;
        }
      }
      out += "}";
    }
    if (!e.children.empty()) {
      out += "(";
      printElements(e.children, out);
      out += ")";
    }
  }
}

}  // namespace

Pipeline parsePipeline(const std::string& text, const PassRegistry& registry, const std::string& source) {
  return PipelineParser(text, registry, source).parse();
}

std::string printPipeline(const Pipeline& p) {
  std::string out;
  printElements(p.elements, out);
  return out;
}

// ---------------------------------------------------------------- editing

namespace {
bool usesIn(const std::vector<PipelineElement>& elements, const std::string& name) {
  for (const auto& e : elements)
    if (e.name == name || usesIn(e.children, name)) return true;
  return false;
}

void dropIn(std::vector<PipelineElement>& elements, const std::string& name) {
  elements.erase(std::remove_if(elements.begin(), elements.end(),
                                [&](const PipelineElement& e) { return e.name == name; }),
                 elements.end());
  for (auto& e : elements) dropIn(e.children, name);
}
}  // namespace

std::string PipelineElement::option(const std::string& key, const std::string& fallback) const {
  for (const auto& [k, v] : options)
    if (k == key) return v;
  return fallback;
}

namespace {

const OptionSpec& declaredOption(const PipelineElement& e, const std::string& key) {
  if (e.specs.empty())
    throw std::logic_error("pipeline element '" + e.name + "' was made without its pass's options (use elementOf)");
  for (const OptionSpec& s : e.specs)
    if (s.name == key) return s;
  throw std::logic_error("pass '" + e.name + "' declares no option '" + key + "'");
}

std::string typedValue(const PipelineElement& e, const std::string& key) {
  const OptionSpec& spec = declaredOption(e, key);
  for (const auto& [k, v] : e.options)
    if (k == key) return v;
  return spec.defaultValue;
}

}  // namespace

bool PipelineElement::boolOption(const std::string& key) const {
  if (declaredOption(*this, key).kind != OptionKind::Bool)
    throw std::logic_error("option '" + key + "' of '" + name + "' is not a bool");
  return typedValue(*this, key) == "true";
}

int64_t PipelineElement::intOption(const std::string& key) const {
  if (declaredOption(*this, key).kind != OptionKind::Int)
    throw std::logic_error("option '" + key + "' of '" + name + "' is not an int");
  return std::stoll(typedValue(*this, key));
}

std::string PipelineElement::stringOption(const std::string& key) const { return typedValue(*this, key); }

PipelineElement elementOf(const PassRegistry& registry, const std::string& name) {
  if (name != "fixpoint" && !registry.find(name)) throw std::invalid_argument("unknown pass '" + name + "'");
  PipelineElement e;
  e.name = name;
  return withOptionSpecs(std::move(e), registry);
}

PipelineElement withOptionSpecs(PipelineElement e, const PassRegistry& registry) {
  if (e.isFixpoint()) {
    e.specs = {{"max-iter", OptionKind::Int, std::to_string(kDefaultFixpointIterations), "rounds before giving up",
                {}, 1.0, 1000.0}};
    for (PipelineElement& c : e.children) c = withOptionSpecs(std::move(c), registry);
  } else if (const PassInfo* info = registry.find(e.name)) {
    e.specs = info->options;
  }
  return e;
}

void PipelineElement::setOption(const std::string& key, const std::string& given) {
  std::string value = given;
  if (!specs.empty()) {
    const OptionSpec* spec = nullptr;
    for (const OptionSpec& s : specs)
      if (s.name == key) spec = &s;
    if (!spec) throw std::invalid_argument("pass '" + name + "' has no option '" + key + "'");
    try {
      value = validateOption(*spec, given);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("option '" + key + "' of '" + name + "': " + e.what());
    }
  }
  for (auto& [k, v] : options)
    if (k == key) {
      v = value;
      return;
    }
  options.emplace_back(key, value);
}

void PipelineElement::eraseOption(const std::string& key) {
  options.erase(std::remove_if(options.begin(), options.end(), [&](const auto& kv) { return kv.first == key; }),
                options.end());
}

bool pipelineUses(const Pipeline& p, const std::string& name) { return usesIn(p.elements, name); }

void dropPass(Pipeline& p, const std::string& name) { dropIn(p.elements, name); }

PassEffects elementEffects(const PipelineElement& e, const PassRegistry& registry, const PassContext* ctx) {
  if (e.isFixpoint()) return {};
  const std::map<std::string, std::string> options(e.options.begin(), e.options.end());
  const auto pass = registry.create(e.name, options);
  return ctx ? pass->effects(*ctx) : pass->effects(PassContext{});
}

namespace {
void visitIn(std::vector<PipelineElement>& elements, const PassRegistry& registry, const PassContext* ctx,
             const std::function<bool(PipelineElement&, const PassEffects&)>& keep) {
  std::vector<PipelineElement> kept;
  for (auto& e : elements) {
    if (e.isFixpoint()) visitIn(e.children, registry, ctx, keep);
    else if (!keep(e, elementEffects(e, registry, ctx))) continue;
    kept.push_back(std::move(e));
  }
  elements = std::move(kept);
}
}  // namespace

void forEachExecution(Pipeline& p, const PassRegistry& registry,
                      const std::function<void(PipelineElement&, const PassEffects&)>& edit, const PassContext* ctx) {
  visitIn(p.elements, registry, ctx, [&](PipelineElement& e, const PassEffects& fx) {
    edit(e, fx);
    return true;
  });
}

std::vector<PassEffects> pipelineEffects(const Pipeline& p, const PassRegistry& registry, const PassContext* ctx) {
  std::vector<PassEffects> all;
  Pipeline copy = p;
  forEachExecution(copy, registry, [&](PipelineElement&, const PassEffects& fx) { all.push_back(fx); }, ctx);
  return all;
}

bool pipelineHas(const Pipeline& p, const PassRegistry& registry, const EffectFilter& has, const PassContext* ctx) {
  const auto all = pipelineEffects(p, registry, ctx);
  return std::any_of(all.begin(), all.end(), has);
}

std::vector<std::string> dropPassesWhere(Pipeline& p, const PassRegistry& registry, const EffectFilter& drop,
                                         const PassContext* ctx) {
  std::vector<std::string> dropped;
  visitIn(p.elements, registry, ctx, [&](PipelineElement& e, const PassEffects& fx) {
    if (!drop(fx)) return true;
    if (std::find(dropped.begin(), dropped.end(), e.name) == dropped.end()) dropped.push_back(e.name);
    return false;
  });
  return dropped;
}

Pipeline passesWhere(const Pipeline& p, const PassRegistry& registry, const EffectFilter& keep,
                     const PassContext* ctx) {
  Pipeline out;
  Pipeline copy = p;
  forEachExecution(copy, registry, [&](PipelineElement& e, const PassEffects& fx) {
    if (keep(fx)) out.elements.push_back(e);
  }, ctx);
  return out;
}

void addExtraPasses(Pipeline& p, const std::vector<PipelineElement>& extra) {
  auto& elements = p.elements;
  const bool closesWithLowering = !elements.empty() && elements.back().name == kTargetPasses;
  elements.insert(closesWithLowering ? elements.end() - 1 : elements.end(), extra.begin(), extra.end());
}

PipelineElement rulesElement(const std::string& path) {
  PipelineElement e;
  e.name = "rules";
  e.options = {{"file", path}};
  return e;
}

PipelineElement ruleTextElement(const std::string& name) {
  PipelineElement e;
  e.name = "rules";
  e.options = {{"text", name}};
  return e;
}

Pipeline parsePipelineOrPreset(const std::string& text, const PassRegistry& registry) {
  const bool preset = text.size() >= 3 && text[0] == '-' && text[1] == 'O' && text[2] >= '0' && text[2] <= '3' &&
                      (text.size() == 3 || text[3] == ',');
  if (!preset) return parsePipeline(text, registry);
  Pipeline p = parsePipeline(presetPipeline(text[2] - '0'), registry, text.substr(0, 3));
  if (text.size() > 4) addExtraPasses(p, parsePipeline(text.substr(4), registry, text).elements);
  return p;
}

}  // namespace ptopt::rewriters
