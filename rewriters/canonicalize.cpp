#include "rewriters/canonicalize.h"

namespace ptopt::rewriters {

PassResult CanonicalizePass::run(ir::Graph&, PassContext&) { throw PassError("pass 'canonicalize' is not implemented yet"); }

}  // namespace ptopt::rewriters
