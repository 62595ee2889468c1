// Semantic comparison of ModelProtos for round-trip tests (test-only; uses protobuf directly).
//
// Two models are semantically equal when they are equal after NormalizeModel, field by field,
// with unset fields equal to their defaults. Normalisation is written independently of
// src/onnx/ so that a bug in the importer's typed-field conversion cannot hide itself.
#pragma once

#include <string>

#include <onnx/onnx_pb.h>

namespace quantkit::testing {

// Parses a model file; returns false (with *error set) when it cannot be read or parsed.
bool LoadModelProto(const std::string& path, ::onnx::ModelProto* proto, std::string* error);

// In place: every tensor (initializers, attributes, sparse, subgraphs) to raw_data following the
// ONNX storage rules, external data read from `base_dir` and inlined; "ai.onnx" domains to "";
// missing attribute types inferred; value_info sorted by name (its order carries no meaning).
// Returns "" or a description of what could not be normalised.
std::string NormalizeModel(::onnx::ModelProto* proto, const std::string& base_dir);

// "" when equal, otherwise the first difference (a field path and both values).
std::string FirstDifference(const ::onnx::ModelProto& expected, const ::onnx::ModelProto& actual);

}  // namespace quantkit::testing
