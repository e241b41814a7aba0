#include "rewriters/const_fold.h"

namespace ptopt::rewriters {

PassResult ConstFoldPass::run(ir::Graph&, PassContext&) { throw PassError("pass 'const-fold' is not implemented yet"); }

}  // namespace ptopt::rewriters
