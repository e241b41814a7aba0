#include "rewriters/rules.h"

namespace ptopt::rewriters {

PassResult RulesPass::run(ir::Graph&, PassContext&) { throw PassError("pass 'rules' is not implemented yet"); }

}  // namespace ptopt::rewriters
