#include "rewriters/cse.h"

namespace ptopt::rewriters {

PassResult CsePass::run(ir::Graph&, PassContext&) { throw PassError("pass 'cse' is not implemented yet"); }

}  // namespace ptopt::rewriters
