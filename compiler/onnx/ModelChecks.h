//===- ModelChecks.h - Checks before ONNX's shape inference -----*- C++ -*-===//
//
// ONNX's shape inference (libonnx 1.12) trusts what it reads: a raw_data
// whose size is no whole number of elements overruns a buffer, a stride or
// block size of 0 divides by zero, a ConvTranspose weight of rank 1 is read
// past its dims, and a shape operand declared with 2^31 elements makes it
// build a shape of 2^31 dimensions. The importer checks these first (each
// found by the fuzzer, test/fuzz), so that a damaged model is an error
// naming the tensor or node.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_ONNX_MODELCHECKS_H
#define LOOM_COMPILER_ONNX_MODELCHECKS_H

#include <cstdint>
#include <string>

namespace onnx {
class ModelProto;
} // namespace onnx

namespace loom::onnx_import {

/// How the importer's messages for a model ONNX's shape inference refuses
/// begin.
inline constexpr const char *kShapeInferenceRejects =
    "ONNX shape inference rejects the model: ";

/// Runs ONNX's shape inference on `model` strictly (stopping at the first
/// node whose shapes do not agree), without data propagation: "" or that
/// node's error, on one line. Call it on a model checkBeforeShapeInference
/// accepted.
std::string inferShapesStrictly(onnx::ModelProto &model);

/// The longest shape operand (of Reshape, Expand, ConstantOfShape) the
/// importer takes: the rank of the tensor it makes.
inline constexpr int64_t kMaxShapeOperandLength = 64;

/// "" if ONNX's shape inference can read `model` safely, else what is
/// wrong: every constant tensor (an initializer or an attribute's, in the
/// graph and its subgraphs) holds as many elements as its dims say; the
/// integer attributes inference divides by or multiplies (strides,
/// dilations, kernel_shape, group, blocksize) are positive and bounded; a
/// convolution's weight has a rank the inference can read; and no shape
/// operand is declared longer than kMaxShapeOperandLength. When the
/// inference of a copy without LayerNormalizations (which finds their
/// inputs' ranks) refuses the model, the message is kShapeInferenceRejects
/// and its error.
std::string checkBeforeShapeInference(const onnx::ModelProto &model);

} // namespace loom::onnx_import

#endif // LOOM_COMPILER_ONNX_MODELCHECKS_H
