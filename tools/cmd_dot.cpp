// `ptopt dot IN.pt -o G.svg`: draws a model's graph (draw/writer.h) and renders it
// in-process (session/render.h); `--diff OTHER.pt` or `--after PIPELINE` draws
// what changed.
#include "ir/model_format.h"
#include "tools/cmd_dot.h"

#include "api/api.h"
#include "tools/commands.h"
#include "driver/util.h"
#include "session/render.h"
#include "session/session.h"

#include "draw/writer.h"
#include "ir/model.h"

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
  cmd.add_option("input", o.input, "A TorchScript file or a torch.export .pt2")->required();
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

int runDot(const DotCommandOptions& o) {
  if (!o.diffWith.empty() && !o.afterPipeline.empty()) throw UsageError("give only one of --diff and --after");
  const std::string format = o.output.empty() || o.output == "-" ? "dot" : session::formatForPath(o.output);
  if (format != "dot" && !session::graphvizAvailable())
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

  // The library's drawing (session/session.h), as ptopt.draw in Python.
  torch::jit::Module model = ir::loadRunnable(o.input);
  std::optional<torch::jit::Module> other;
  if (!o.diffWith.empty()) other = ir::loadRunnable(o.diffWith);
  DrawRequest request;
  request.method = o.method;
  request.inputShapes = o.inputShapes;
  request.other = other ? &*other : nullptr;
  request.after = o.afterPipeline.empty() ? nullptr : &pipeline;
  if (other)
    options.title = name + " → " + std::filesystem::path(o.diffWith).filename().string() + methodNote;
  else if (request.after)
    options.title = name + methodNote + " after " + rewriters::printPipeline(pipeline);
  else
    options.title = name + methodNote;
  FaceWords words;
  words.referenceName = "'" + o.input + "'";
  words.candidateName = "'" + o.diffWith + "'";
  words.shapesName = "--input-shape";
  Drawing drawing;
  try {
    drawing = drawModel(model, options, request, words);
  } catch (const std::invalid_argument& e) {  // a missing method, bad --input-shape
    throw UsageError(e.what());
  }
  const std::string& dot = drawing.dot;

  if (format == "dot" && (o.output.empty() || o.output == "-")) {
    std::cout << dot;
    return 0;
  }
  session::writeDrawing(dot, o.output);
  std::cout << fmt::format("wrote {} ({} nodes", o.output, drawing.nodes);
  if (const auto& d = drawing.diff) std::cout << fmt::format("; {} added, {} changed, {} removed", d->added, d->changed, d->removed);
  std::cout << fmt::format(") in {:.2f} s\n", sw.ms() / 1000);
  return 0;
}

}  // namespace ptopt::tools
