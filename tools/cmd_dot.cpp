// `ptopt dot IN.pt -o G.svg`: draws a model's graph (draw/writer.h) and renders it
// in-process (tools/render.h); `--diff OTHER.pt` or `--after PIPELINE` draws
// what changed.
#include "tools/cmd_dot.h"

#include "api/api.h"
#include "tools/commands.h"
#include "tools/render.h"
#include "driver/util.h"

#include "draw/writer.h"
#include "ir/model.h"
#include "rewriters/shape_prop.h"

#include <filesystem>
#include <fmt/format.h>
#include <iostream>

namespace ptopt::tools {

void registerDotOptions(CLI::App& cmd, DotCommandOptions& o) {
  cmd.description(
      "Draw a model's graph with GraphViz (or the difference between two models)\n"
      "Examples:\n"
      "  ptopt dot resnet18.pt -o resnet18.svg\n"
      "  ptopt dot resnet18.pt -o r.png --depth 1 --input-shape 1,3,224,224 --color-by dtype\n"
      "  ptopt dot resnet18.pt --diff resnet18_opt.pt -o diff.svg\n"
      "  ptopt dot resnet18.pt --after -O1 -o o1.svg      # what -O1 does, without writing a model\n"
      "  ptopt dot model.pt > model.dot                     # DOT text on stdout");
  cmd.add_option("input", o.input, "TorchScript model")->required();
  cmd.add_option("-o,--output", o.output, "Output: .dot/.gv (DOT text), .svg, .png or .pdf (default: DOT to stdout)");
  cmd.add_option("--diff", o.diffWith, "Draw the difference to OTHER.pt (added green, changed yellow, removed dashed)");
  cmd.add_option("--after", o.afterPipeline, "Draw the difference made by a pipeline (e.g. -O1, 'fold-conv-bn,dce')");
  cmd.add_option("--method", o.method, "Method to draw (default forward)");
  cmd.add_option("--depth", o.depth, "Collapse module scopes deeper than N into one box each")->check(CLI::PositiveNumber);
  cmd.add_option("--max-nodes", o.maxNodes, "Collapse scopes (or cut) to keep at most N drawn nodes (0: no limit)");
  cmd.add_flag("--show-constants", o.showConstants, "Draw constant tensors as nodes (default: in their users' labels)");
  cmd.add_option("--color-by", o.colorBy, "Fill colour by op family or output dtype")
      ->check(CLI::IsMember({"op", "dtype"}));
  cmd.add_flag("--no-clusters", o.noClusters, "No boxes for module scopes");
  cmd.add_flag("--no-legend", o.noLegend, "No legend (op counts, casts, parameter bytes)");
  cmd.add_option("--input-shape", o.inputShapes,
                 "Example input (1,3,224,224 | 2,7:int64), one per model input: labels then show dtype, shape and "
                 "memory format");
}

namespace {

void propagateShapes(ir::Graph& g, const std::vector<std::string>& shapes) {
  if (shapes.empty()) return;
  std::vector<verify::InputSpec> specs;
  for (const auto& s : shapes) {
    try {
      specs.push_back(verify::parseInputSpec(s));
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
  try {  // left-out inputs take their defaults
    specs = verify::completeInputSpecs(specs, g, fmt::format("--input-shape was given {} time(s)", shapes.size()));
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(specs, 0);
  try {
    rewriters::ShapePropPass().run(g, ctx);
  } catch (const std::exception& e) {
    throw ir::InputError("the model fails on the given --input-shape: " + ir::torchErrorMessage(e));
  }
}

ir::Model importFor(const std::string& path, const std::string& method) {
  ir::ImportOptions options;
  if (method != "forward") options.preserveMethods.push_back(method);
  torch::jit::Module m = ir::loadTorchScript(path);
  m.eval();
  return importModel(m, options);
}

ir::Graph& methodOf(const ir::Model& model, const std::string& method, const std::string& path) {
  ir::Graph* g = model.method(method);
  if (!g) throw UsageError("'" + path + "' has no method '" + method + "'");
  return *g;
}

}  // namespace

int runDot(const DotCommandOptions& o) {
  if (!o.diffWith.empty() && !o.afterPipeline.empty()) throw UsageError("give only one of --diff and --after");
  const std::string format = o.output.empty() || o.output == "-" ? "dot" : formatForPath(o.output);
  if (format != "dot" && !graphvizAvailable())
    throw UsageError("this ptopt was built without GraphViz, so it cannot write ." + format + "; write .dot and run `dot -T" +
                     format + " G.dot -o G." + format + "`");
  rewriters::Pipeline pipeline;
  if (!o.afterPipeline.empty()) {
    try {
      pipeline = parsePipelineOrPreset(o.afterPipeline);
    } catch (const rewriters::PipelineError& e) {
      throw UsageError(std::string("invalid pipeline: ") + e.what());
    }
  }

  Stopwatch sw;
  draw::DotOptions options;
  options.depth = o.depth;
  options.maxNodes = o.maxNodes;
  options.showConstants = o.showConstants;
  options.colorBy = *draw::dotColorByFromName(o.colorBy);
  options.clusters = !o.noClusters;
  options.legend = !o.noLegend;
  const std::string name = std::filesystem::path(o.input).filename().string();
  const std::string methodNote = o.method == "forward" ? "" : " (" + o.method + ")";

  ir::Model model = importFor(o.input, o.method);
  ir::Graph& graph = methodOf(model, o.method, o.input);
  propagateShapes(graph, o.inputShapes);

  std::string dot;
  draw::DiffCounts counts;
  bool isDiff = false;
  if (!o.diffWith.empty()) {
    ir::Model other = importFor(o.diffWith, o.method);
    ir::Graph& otherGraph = methodOf(other, o.method, o.diffWith);
    propagateShapes(otherGraph, o.inputShapes);
    options.title = name + " → " + std::filesystem::path(o.diffWith).filename().string() + methodNote;
    dot = draw::writeDotDiff(graph, otherGraph, options, &counts);
    isDiff = true;
  } else if (!o.afterPipeline.empty()) {
    ir::Model after = model.clone();
    rewriters::PassContext ctx;
    rewriters::PassManager(defaultRegistry(), pipeline).run(after, ctx);
    ir::Graph& afterGraph = methodOf(after, o.method, o.input);
    propagateShapes(afterGraph, o.inputShapes);
    options.title = name + methodNote + " after " + rewriters::printPipeline(pipeline);
    dot = draw::writeDotDiff(graph, afterGraph, options, &counts);
    isDiff = true;
  } else {
    options.title = name + methodNote;
    dot = draw::writeDot(graph, options);
  }

  if (format == "dot" && (o.output.empty() || o.output == "-")) {
    std::cout << dot;
    return 0;
  }
  writeDrawing(dot, o.output);
  std::cout << fmt::format("wrote {} ({} nodes", o.output, graph.numNodes());
  if (isDiff) std::cout << fmt::format("; {} added, {} changed, {} removed", counts.added, counts.changed, counts.removed);
  std::cout << fmt::format(") in {:.2f} s\n", sw.ms() / 1000);
  return 0;
}

}  // namespace ptopt::tools
