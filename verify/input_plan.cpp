#include "verify/input_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (in <fmt/format.h> only before fmt 11)

namespace ptopt::verify {

namespace {

// --inputs FILE: the values in the file, by name or in order; inputs the
// file leaves out (a shorter tuple, a dict without the key) take their
// defaults, as when Python calls forward without them.
InputPlan planFromFile(const InputRequest& r, const ir::Graph& forward) {
  const auto names = inputNames(forward);
  const std::string what = r.values ? r.valuesName : fmt::format("--inputs '{}'", r.file);
  InputSet set;
  try {
    set = r.values ? *r.values : loadInputsFile(r.file);
  } catch (const std::invalid_argument& e) {
    throw InputPlanError(e.what());
  }
  if (set.values.size() > names.size())
    throw InputPlanError(fmt::format("{} holds {} value(s), the model takes {} input(s) ({})", what,
                                     set.values.size(), names.size(), fmt::join(names, ", ")));
  std::vector<c10::IValue> values;
  try {
    values = completeInputValues(set, forward, fmt::format("{} holds {} value(s)", what, set.values.size()));
  } catch (const std::invalid_argument& e) {
    throw InputPlanError(e.what());
  }
  InputSource source;
  source.fixed = std::move(values);
  source.seed = r.seed;
  source.executor = parseExecutor(r.executor);
  InputPlan plan;
  plan.source = source;
  return plan;
}

// Inputs that no --input-shape can describe (List[Tensor], tuples, dicts,
// strings) come only from a file saved in Python, unless they have a
// default and are left out (a detection model's `targets`). Returns why
// verification is skipped, or nullopt when every required input can be built.
std::optional<std::string> unbuildableInputs(const InputRequest& r, const ir::Graph& forward) {
  const auto names = inputNames(forward);
  std::vector<std::string> unbuildable, examples;
  const auto inputs = forward.inputs();
  size_t required = inputs.size();  // trailing inputs with defaults may be left out
  while (required > 0 && inputDefault(*inputs[required - 1])) --required;
  for (size_t i = 0; i < required; ++i) {
    if (!isBuildableInputType(inputs[i]->type()))
      unbuildable.push_back(fmt::format("'{}' ({})", names[i], inputs[i]->type()->annotation_str()));
    examples.push_back(pythonExample(inputs[i]->type()));
  }
  if (unbuildable.empty()) return std::nullopt;
  const std::string howTo = fmt::format(
      "save the inputs from Python, in order, as a tuple: torch.save(({}{}), 'inputs.pt'), and pass "
      "--inputs inputs.pt",
      fmt::join(examples, ", "), examples.size() == 1 ? "," : "");
  const std::string what = fmt::format("ptopt cannot build input {} from a shape", fmt::join(unbuildable, ", "));
  if (!r.shapes.empty()) throw InputPlanError(fmt::format("--input-shape: {}; {}", what, howTo));
  return fmt::format("verification skipped: {}; {}", what, howTo);
}

InputSource seeded(const InputRequest& r, std::vector<InputSpec> specs) {
  InputSource source;
  source.specs = std::move(specs);
  source.iterations = r.iterations;
  source.seed = r.seed;
  source.executor = parseExecutor(r.executor);
  source.addOtherSizes(r.otherSizes);
  return source;
}

}  // namespace

InputPlan planInputs(const InputRequest& r, const ir::Graph& forward) {
  if ((!r.file.empty() || r.values) && !r.shapes.empty())
    throw InputPlanError("give either --inputs or --input-shape, not both");
  if (!r.file.empty() || r.values) return planFromFile(r, forward);
  InputPlan plan;
  if (auto skipped = unbuildableInputs(r, forward)) {
    plan.message = *skipped;
    return plan;
  }
  std::vector<InputSpec> specs;
  try {
    for (const auto& s : r.shapes) specs.push_back(parseInputSpec(s));
    if (!r.intRange.empty()) {
      auto [lo, hi] = parseIntRange(r.intRange);
      applyIntRange(specs, lo, hi);
    }
  } catch (const std::invalid_argument& e) {
    throw InputPlanError(e.what());
  }
  if (specs.empty()) {
    if (auto recorded = recordedInputSpecs(forward)) {
      // A torch.export program records the shapes it was exported at (and
      // takes no others): those, not an assumption.
      if (!r.intRange.empty()) {
        auto [lo, hi] = parseIntRange(r.intRange);
        applyIntRange(*recorded, lo, hi);
      }
      plan.source = seeded(r, *recorded);
    } else if (auto inferred = inferInputSpecs(forward)) {
      plan.source = seeded(r, inferred->specs);
      plan.inferred = true;
      plan.message = inferred->assumption;
    } else {
      plan.message = fmt::format(
          "verification skipped: the input shapes of ({}) cannot be inferred safely; give one --input-shape per "
          "input (e.g. --input-shape 1,3,224,224) or --inputs FILE to verify",
          fmt::join(inputNames(forward), ", "));
    }
    return plan;
  }
  try {
    specs = completeInputSpecs(specs, forward,
                               fmt::format("--input-shape was given {} time(s)", r.shapes.size()));
  } catch (const std::invalid_argument& e) {
    throw InputPlanError(e.what());
  }
  plan.source = seeded(r, std::move(specs));
  return plan;
}

}  // namespace ptopt::verify
