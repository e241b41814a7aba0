// The --tune stage of `ptopt IN OUT` (tools/cmd_optimize.cpp) and its
// options; the work is the library's (tune/tune_model.h), so that other
// callers (the Python package) run the same thing.
#pragma once

#include "tools/commands.h"

#include "ir/model.h"
#include "rewriters/pass.h"
#include "rewriters/pipeline.h"
#include "tune/tune_model.h"

#include <c10/core/Device.h>

namespace ptopt::tools {

// Tunes `pipeline` on `device` with the example inputs of `ctx` (a usage
// error without them). Progress lines go to stderr unless `quiet`.
tune::TuneResult runTuneStage(const TuneCliOptions& o, const ir::Model& model, const rewriters::Pipeline& pipeline,
                              const rewriters::PassContext& ctx, c10::Device device, bool quiet);

}  // namespace ptopt::tools
