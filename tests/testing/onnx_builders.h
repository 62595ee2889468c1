// Small ModelProto builders shared by tests that hand-craft what a parser cannot express
// (test-only; uses protobuf directly).
#pragma once

#include <cstdint>
#include <string>

#include <onnx/onnx_pb.h>

namespace quantkit::testing {

// Adds a float initializer `name` of shape [count] whose bytes live in the external file
// `location` (relative to the model's directory); returns it for further edits.
inline ::onnx::TensorProto* AddExternalFloatInitializer(::onnx::GraphProto* graph,
                                                        const std::string& name, int64_t count,
                                                        const std::string& location) {
  ::onnx::TensorProto* w = graph->add_initializer();
  w->set_name(name);
  w->set_data_type(::onnx::TensorProto::FLOAT);
  w->add_dims(count);
  w->set_data_location(::onnx::TensorProto::EXTERNAL);
  ::onnx::StringStringEntryProto* loc = w->add_external_data();
  loc->set_key("location");
  loc->set_value(location);
  return w;
}

}  // namespace quantkit::testing
