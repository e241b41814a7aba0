#include "verify/inputs.h"

#include "ir/literal.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <stdexcept>

namespace ptopt::verify {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) out.push_back(item);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

bool looksLikeShape(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789, ") == std::string::npos;
}

}  // namespace

std::string InputSpec::str() const {
  std::string out = name.empty() ? "" : name + ":";
  switch (kind) {
    case Kind::Int: return out + "int:" + std::to_string(static_cast<int64_t>(scalar));
    case Kind::Float: return out + "float:" + ir::formatDouble(scalar);
    case Kind::Bool: return out + "bool:" + std::to_string(scalar != 0);
    case Kind::Tensor: break;
  }
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  if (dtype != c10::ScalarType::Float) out += ":" + ir::dtypeName(dtype);
  return out;
}

InputSpec parseInputSpec(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument("bad input shape '" + text + "': " + why +
                                 " (expected e.g. 1,3,224,224 or x:1,3,224,224 or 2,7:int64)");
  };
  InputSpec spec;
  std::vector<std::string> parts = split(text, ':');
  if (parts.empty()) throw bad("empty");
  // Scalars: [name:]int:3 / float:0.5 / bool:1
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const std::string& k = parts[i];
    if (k == "int" || k == "float" || k == "bool") {
      if (i + 2 != parts.size() || i > 1) throw bad("a scalar is written int:VALUE");
      spec.name = i == 1 ? parts[0] : "";
      spec.kind = k == "int" ? InputSpec::Kind::Int : k == "float" ? InputSpec::Kind::Float : InputSpec::Kind::Bool;
      try {
        spec.scalar = std::stod(parts[i + 1]);
      } catch (const std::exception&) {
        throw bad("'" + parts[i + 1] + "' is not a number");
      }
      return spec;
    }
  }
  size_t shapeIdx = 0;
  if (!looksLikeShape(parts[0])) {
    spec.name = parts[0];
    shapeIdx = 1;
  }
  if (shapeIdx >= parts.size() || !looksLikeShape(parts[shapeIdx])) throw bad("no shape");
  for (const auto& d : split(parts[shapeIdx], ',')) {
    if (d.empty()) throw bad("empty dimension");
    spec.shape.push_back(std::stoll(d));
  }
  if (shapeIdx + 1 < parts.size()) {
    auto dt = ir::dtypeFromName(parts[shapeIdx + 1]);
    if (!dt) throw bad("unknown dtype '" + parts[shapeIdx + 1] + "' (use float32, float16, bfloat16, float64, int64, int32, uint8, bool...)");
    spec.dtype = *dt;
  }
  if (shapeIdx + 2 < parts.size()) throw bad("too many ':' parts");
  return spec;
}

InputSpec inputSpecFromJson(const nlohmann::json& j) {
  InputSpec spec;
  const std::string type = j.value("type", "tensor");
  spec.name = j.value("name", "");
  if (type == "tensor") {
    spec.shape = j.at("shape").get<std::vector<int64_t>>();
    auto dt = ir::dtypeFromName(j.value("dtype", "float32"));
    if (!dt) throw std::invalid_argument("unknown dtype in " + j.dump());
    spec.dtype = *dt;
    spec.low = j.value("low", int64_t{0});
    spec.high = j.value("high", int64_t{100});
  } else if (type == "int" || type == "float" || type == "bool") {
    spec.kind = type == "int" ? InputSpec::Kind::Int : type == "float" ? InputSpec::Kind::Float : InputSpec::Kind::Bool;
    spec.scalar = j.at("value").is_boolean() ? (j.at("value").get<bool>() ? 1.0 : 0.0) : j.at("value").get<double>();
  } else {
    throw std::invalid_argument("unknown input type '" + type + "'");
  }
  return spec;
}

std::vector<c10::IValue> makeInputs(const std::vector<InputSpec>& specs, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  std::vector<c10::IValue> out;
  for (const auto& s : specs) {
    switch (s.kind) {
      case InputSpec::Kind::Int: out.emplace_back(static_cast<int64_t>(s.scalar)); break;
      case InputSpec::Kind::Float: out.emplace_back(s.scalar); break;
      case InputSpec::Kind::Bool: out.emplace_back(s.scalar != 0); break;
      case InputSpec::Kind::Tensor:
        if (at::isFloatingType(s.dtype) || at::isComplexType(s.dtype))
          out.emplace_back(at::randn(s.shape, gen, at::TensorOptions().dtype(at::kFloat)).to(s.dtype));
        else if (s.dtype == at::kBool)
          out.emplace_back(at::randint(0, 2, s.shape, gen, at::TensorOptions().dtype(at::kLong)).to(at::kBool));
        else
          out.emplace_back(at::randint(s.low, s.high, s.shape, gen, at::TensorOptions().dtype(s.dtype)));
        break;
    }
  }
  return out;
}

std::vector<c10::IValue> cloneInputs(const std::vector<c10::IValue>& inputs) {
  std::vector<c10::IValue> out;
  for (const auto& v : inputs) out.push_back(v.isTensor() ? c10::IValue(v.toTensor().clone()) : v);
  return out;
}

}  // namespace ptopt::verify
