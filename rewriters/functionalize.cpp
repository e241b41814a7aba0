#include "rewriters/functionalize.h"

namespace ptopt::rewriters {

PassResult FunctionalizePass::run(ir::Graph&, PassContext&) { throw PassError("pass 'functionalize' is not implemented yet"); }

}  // namespace ptopt::rewriters
