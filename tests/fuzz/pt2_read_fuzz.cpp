// libFuzzer target: the .pt2 reader (ir::parsePt2Archive). The input is the
// program's JSON (models/model.json); the archive around it is fixed (the
// weights of a 2x2 linear, their table, archive_format), so mutations reach
// the JSON and the graph building instead of failing the zip's CRCs (the
// zip itself is archive_check's target). A bad program throws ir::InputError
// and nothing else; a program that reads gives IR that passes the linter.
#include "ir/lint.h"
#include "ir/pt2.h"

#include <caffe2/serialize/inline_container.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace {

const char* kWeightsConfig =
    R"({"config": {"0.weight": {"path_name": "weight_0", "is_param": true, "use_pickle": false, "tensor_meta": )"
    R"({"dtype": 7, "sizes": [{"as_int": 2}, {"as_int": 2}], "requires_grad": true, "device": {"type": "cpu", )"
    R"("index": null}, "strides": [{"as_int": 2}, {"as_int": 1}], "storage_offset": {"as_int": 0}, "layout": 7}}, )"
    R"("0.bias": {"path_name": "weight_1", "is_param": true, "use_pickle": false, "tensor_meta": {"dtype": 7, )"
    R"("sizes": [{"as_int": 2}], "requires_grad": true, "device": {"type": "cpu", "index": null}, "strides": )"
    R"([{"as_int": 1}], "storage_offset": {"as_int": 0}, "layout": 7}}}})";

std::string archiveAround(const std::string& programJson) {
  std::string bytes;
  caffe2::serialize::PyTorchStreamWriter writer([&bytes](const void* data, size_t n) {
    bytes.append(static_cast<const char*>(data), n);
    return n;
  });
  auto put = [&writer](const std::string& name, const std::string& data) {
    writer.writeRecord(name, data.data(), data.size());
  };
  const float weight[4] = {1, 2, 3, 4}, bias[2] = {0.5f, -0.5f};
  put("archive_format", "pt2");
  put("archive_version", "0");
  put("data/weights/weight_0", std::string(reinterpret_cast<const char*>(weight), sizeof weight));
  put("data/weights/weight_1", std::string(reinterpret_cast<const char*>(bias), sizeof bias));
  put("data/weights/model_weights_config.json", kWeightsConfig);
  put("data/constants/model_constants_config.json", R"({"config": {}})");
  put("models/model.json", programJson);
  writer.writeEndOfFile();
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 16384) return 0;
  const std::string json(reinterpret_cast<const char*>(data), size);
  ptopt::ir::Pt2ReadResult result;
  try {
    result = ptopt::ir::parsePt2Archive(archiveAround(json), "fuzz.pt2", 8);
  } catch (const ptopt::ir::InputError&) {
    return 0;
  }
  if (!ptopt::ir::lint(result.model.forward()).empty()) std::abort();
  return 0;
}
