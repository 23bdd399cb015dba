//===- ExportedParameters.h - Parameters as the model had them --*- C++ -*-===//
//
// What exporters do to a model's parameters, undone before import, so that
// Loom trains the parameters the source model has:
//
// - torch.onnx.export stores initializers of equal value once and makes the
//   others `Identity` nodes whose outputs carry their parameters' names (a
//   fresh transformer's LayerNorm weights, all ones, arrive as one tensor).
//   Each such parameter becomes an initializer of its own, initialized from
//   the shared value. One initializer read directly in several places stays
//   one parameter: that is a true tie (a GPT's head reusing its embedding).
// - Constant folding replaces a parameter's transpose, reshape, cast or
//   leading rows (`pos(arange(T))`) by an initializer with an exporter's
//   name (`onnx::MatMul_12`), which training would leave as it is. An
//   initializer with no parameter's name that is, bit for bit, such a view
//   of exactly one trainable initializer becomes that op applied to the
//   parameter; a view of several is refused, naming them. A tensor whose
//   elements are all equal (a fresh model's ones and zeros) proves nothing
//   and stays a constant, which the notes say.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_ONNX_EXPORTEDPARAMETERS_H
#define LOOM_COMPILER_ONNX_EXPORTEDPARAMETERS_H

#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace onnx {
class GraphProto;
} // namespace onnx

namespace loom::onnx_import {

/// True for a name PyTorch gives a parameter or buffer: dotted identifiers
/// ("fc.weight", "layers.0.norm1.bias", "scale"), not the names exporters
/// give values ("/fc/Gemm_output_0", "onnx::MatMul_12").
bool isParameterName(llvm::StringRef name);

/// Rewrites `graph` so that every parameter the exporter shared or folded is
/// a trained initializer of its own again (see the file comment); initializer
/// data outside the graph is read from `baseDir`. Appends one line per case
/// to `notes`. Returns "" or, when a folded tensor matches several
/// parameters, the error naming them and what to change.
std::string restoreExportedParameters(onnx::GraphProto &graph,
                                      llvm::StringRef baseDir,
                                      std::vector<std::string> &notes);

} // namespace loom::onnx_import

#endif // LOOM_COMPILER_ONNX_EXPORTEDPARAMETERS_H
