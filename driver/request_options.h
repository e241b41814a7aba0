// The request's options by name: one table (request_options.cpp) of the
// driver::Request fields a front end may set, each by the name Python's
// ptopt.optimize keyword carries (the CLI's flag is the same name with '-'
// for '_': measure_budget, --measure-budget), set from a JSON value and
// checked. The defaults are Request's own (driver/request.h), stated there
// once: a front end sets only what its user gave. Values that are not data
// (a loaded module, tensors in memory) travel beside the table.
#pragma once

#include "driver/request.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace ptopt::driver {

struct RequestOption {
  std::string name;  // "measure_budget"
  std::string type;  // what the value is: "bool", "number", "integer", "string", "strings", "numbers by output"
  std::string help;  // one line (what the field means: driver/request.h)
};
// Every option, in the table's order.
const std::vector<RequestOption>& requestOptions();

// Sets option `name` of `request` to `value`. Throws RequestError naming the
// option for an unknown name (with the closest one) or a value of another type.
void setRequestOption(Request& request, const std::string& name, const nlohmann::json& value);

// Every member of `options` (an object of name: value; null values are left
// out: the default).
void setRequestOptions(Request& request, const nlohmann::json& options);

}  // namespace ptopt::driver
