#include "rewriters/shape_prop.h"

namespace ptopt::rewriters {

PassResult ShapePropPass::run(ir::Graph&, PassContext&) { throw PassError("pass 'shape-prop' is not implemented yet"); }

}  // namespace ptopt::rewriters
