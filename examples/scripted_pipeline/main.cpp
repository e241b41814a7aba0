// Scripting a ptopt pipeline from a program: load, build a pipeline in code,
// run it, verify against the original, save.
//
//   scripted_pipeline IN.pt OUT.pt 1,3,224,224
#include <tools/api.h>

#include <iostream>

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: scripted_pipeline IN.pt OUT.pt INPUT_SHAPE...\n";
    return 2;
  }
  try {
    ptopt::Optimizer opt = ptopt::Optimizer::load(argv[1]);

    // A pipeline is text (or a preset like "-O1")...
    ptopt::rewriters::Pipeline pipeline =
        ptopt::parsePipelineOrPreset("canonicalize,fixpoint{max-iter=3}(cse,dce)");
    // ...and can be extended in code.
    ptopt::rewriters::PipelineElement dce;
    dce.name = "dce";
    pipeline.elements.push_back(dce);
    std::cout << "pipeline: " << ptopt::rewriters::printPipeline(pipeline) << "\n";

    ptopt::rewriters::RunReport report = opt.run(pipeline);
    std::cout << report.timingTable();

    std::vector<std::string> shapes(argv + 3, argv + argc);
    ptopt::VerifyResult v = opt.verify(shapes);
    std::cout << v.summary << (v.passed ? "verified\n" : "verification FAILED\n");
    if (!v.passed) return 3;
    opt.save(argv[2]);
    std::cout << "wrote " << argv[2] << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
