#include "verify/blame.h"

#include <fmt/format.h>

namespace ptopt::verify {

std::string Blame::message() const {
  return fmt::format("verify-each: pass '{}' broke tolerance: {}\n{}", pass, report.verdict(), report.failureReport());
}

std::optional<Blame> PassBlamer::afterPass(const rewriters::PassExecution& exec) {
  if (!exec.changed || blamed_) return std::nullopt;
  VerifyReport r = runner_.check(current_());
  if (r.passed) return std::nullopt;
  blamed_ = fmt::format("{} (execution {}, method {})", exec.pass, exec.index, exec.method);
  return Blame{*blamed_, std::move(r)};
}

}  // namespace ptopt::verify
