//===- NodeContext.h - What an ONNX op converter sees ----------*- C++ -*-===//
//
// Internal to the ONNX front end. A converter turns one ONNX node into loom
// ops (or a folded HostTensor) through a NodeContext: typed access to the
// node's inputs and attributes, checked op creation, and errors that carry
// the node's name and op type.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_ONNX_NODECONTEXT_H
#define LOOM_COMPILER_ONNX_NODECONTEXT_H

#include "compiler/onnx/HostTensor.h"
#include "compiler/onnx/OnnxImporter.h"
#include "dialects/LoomDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"

#include "onnx/onnx_pb.h"

#include <functional>
#include <variant>

namespace loom::onnx_import {

/// An ONNX value during import: a run-time value or a known constant.
using OnnxValue = std::variant<mlir::Value, HostTensor>;

/// The function's constants: created once per distinct value, at the top of
/// the body in the order they are first needed.
class ConstantPool {
public:
  explicit ConstantPool(mlir::Block *body) : body(body) {}
  mlir::Value get(mlir::OpBuilder &builder, mlir::Location loc,
                  mlir::DenseElementsAttr value);
  /// The constant of the known value named `name`, converted to an
  /// attribute only the first time: a large folded value read by many
  /// nodes (a causal mask every layer reads) costs its size in each
  /// conversion and uniquing.
  mlir::Value get(mlir::OpBuilder &builder, mlir::Location loc,
                  llvm::StringRef name, const HostTensor &value);
  /// Forgets what `name` was: it is being given a new value.
  void forget(llvm::StringRef name) { byName.erase(name); }

private:
  mlir::Block *body;
  mlir::Operation *last = nullptr;
  llvm::DenseMap<mlir::Attribute, mlir::Value> byValue;
  llvm::StringMap<mlir::Value> byName;
};

/// The error a converter reports: its status and message.
struct NodeError {
  ImportStatus status;
  std::string message;
};

/// The failure a converter returns after recording an error: converts to
/// LogicalResult and to any FailureOr<T>.
struct ConversionFailure {
  operator mlir::LogicalResult() const { return mlir::failure(); }
  template <typename T> operator mlir::FailureOr<T>() const {
    return mlir::failure();
  }
};

class NodeContext {
public:
  NodeContext(const onnx::NodeProto &node, int64_t opset, int64_t version,
              mlir::OpBuilder &builder, mlir::Location loc,
              llvm::StringMap<OnnxValue> &values, ConstantPool &constants,
              std::function<std::string()> takeDiagnostics)
      : node(node), opset(opset), version(version), builder(builder), loc(loc),
        values(values), constants(constants),
        takeDiagnostics(std::move(takeDiagnostics)) {}

  const onnx::NodeProto &node;
  /// The model's opset of the default domain.
  const int64_t opset;
  /// The version of the node's operator that this opset gives: the
  /// `since_version` of its schema (Softmax at opset 12 is Softmax-11).
  /// Converters whose operator changed form between versions switch on it.
  const int64_t version;
  mlir::OpBuilder &builder;
  const mlir::Location loc;

  mlir::MLIRContext *getContext() const { return builder.getContext(); }

  //===--- Inputs ---------------------------------------------------------===//

  /// Whether input `i` is given (present and not the empty name).
  bool hasInput(int i) const {
    return i < node.input_size() && !node.input(i).empty();
  }
  /// The known value of input `i`, or nullptr if it is a run-time value.
  const HostTensor *constant(int i) const;
  /// Whether every given input is a known constant.
  bool allConstant() const;
  /// Input `i` as a run-time value; constants are materialised.
  mlir::Value value(int i);
  mlir::RankedTensorType type(int i) const;
  llvm::ArrayRef<int64_t> shape(int i) const { return type(i).getShape(); }
  int64_t rank(int i) const { return type(i).getRank(); }
  /// Input `i`, which must be a constant integer tensor (shapes, axes).
  mlir::FailureOr<std::vector<int64_t>> constantInts(int i,
                                                     llvm::StringRef what);

  //===--- Attributes -----------------------------------------------------===//

  const onnx::AttributeProto *attr(llvm::StringRef name) const;
  mlir::FailureOr<int64_t> attrInt(llvm::StringRef name, int64_t dflt);
  mlir::FailureOr<float> attrFloat(llvm::StringRef name, float dflt);
  mlir::FailureOr<std::string> attrString(llvm::StringRef name,
                                          llvm::StringRef dflt);
  /// An ints attribute; std::nullopt inside if absent.
  mlir::FailureOr<std::optional<std::vector<int64_t>>>
  attrInts(llvm::StringRef name);

  //===--- Outputs --------------------------------------------------------===//

  bool hasOutput(int i) const {
    return i < node.output_size() && !node.output(i).empty();
  }
  void setOutput(int i, OnnxValue v);
  /// Sets output 0 to `v`, or fails with it: a converter's last line.
  mlir::LogicalResult setResult(mlir::FailureOr<mlir::Value> v) {
    if (mlir::failed(v))
      return mlir::failure();
    setOutput(0, *v);
    return mlir::success();
  }
  /// Records that `v` is the new value of input `i`, a buffer argument
  /// (batch normalization's running statistics in training mode): the
  /// function returns it with `loom.updates`, so the step stores it in
  /// place of the buffer, and later nodes reading the input see `v`.
  /// Returns false (recording nothing) when input `i` is not a buffer
  /// argument, e.g. a constant.
  bool updateInput(int i, mlir::Value v);

  /// The import's options (--batch, --sync-batchnorm, ...).
  const ImportOptions *options = nullptr;
  /// The model's producer_name ("pytorch" for torch.onnx.export), for the
  /// few places where the exporting framework's semantics differ from
  /// ONNX's reference (training BatchNormalization's running variance).
  llvm::StringRef producer;
  /// Buffer arguments and their latest new values, in the order first
  /// updated; null when the import records no updates.
  llvm::SmallVectorImpl<std::pair<mlir::BlockArgument, mlir::Value>>
      *stateUpdates = nullptr;

  //===--- Op creation ----------------------------------------------------===//

  /// Creates an op whose result type it infers, then verifies it. On failure
  /// the op is erased and the verifier's message is kept for the error.
  template <typename OpTy, typename... Args>
  mlir::FailureOr<mlir::Value> create(Args &&...args) {
    auto op = OpTy::create(builder, loc, builder.getNoneType(),
                           std::forward<Args>(args)...);
    return finish(op.getOperation(), /*infer=*/true);
  }
  /// Creates an op with the given result type, then verifies it.
  template <typename OpTy, typename... Args>
  mlir::FailureOr<mlir::Value> createTyped(mlir::Type type, Args &&...args) {
    auto op = OpTy::create(builder, loc, type, std::forward<Args>(args)...);
    return finish(op.getOperation(), /*infer=*/false);
  }
  /// As create, for an op with two results: both of them.
  template <typename OpTy, typename... Args>
  mlir::FailureOr<std::pair<mlir::Value, mlir::Value>>
  createPair(Args &&...args) {
    mlir::Type none = builder.getNoneType();
    auto op =
        OpTy::create(builder, loc, none, none, std::forward<Args>(args)...);
    mlir::Operation *raw = op.getOperation();
    auto first = finish(raw, /*infer=*/true);
    if (mlir::failed(first))
      return mlir::failure();
    return std::pair<mlir::Value, mlir::Value>(*first, raw->getResult(1));
  }
  /// A known value as a (shared) loom.constant.
  mlir::Value constantValue(const HostTensor &t) {
    return constants.get(builder, loc, t.toAttr(getContext()));
  }
  /// A scalar (rank-0) constant of the given element type.
  mlir::Value scalar(mlir::Type elementType, double v);
  /// A reshape, or `v` itself when the shape is already `shape`.
  mlir::FailureOr<mlir::Value> reshape(mlir::Value v,
                                       llvm::ArrayRef<int64_t> shape);

  //===--- Errors ---------------------------------------------------------===//

  /// Records an error; the converter returns the failure it gives.
  ConversionFailure fail(ImportStatus status, const llvm::Twine &message);
  ConversionFailure unsupported(const llvm::Twine &message) {
    return fail(ImportStatus::Unsupported, message);
  }
  ConversionFailure invalid(const llvm::Twine &message) {
    return fail(ImportStatus::InvalidModel, message);
  }
  /// Normalises a possibly negative axis against `rank`, or fails.
  mlir::FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank,
                                         llvm::StringRef what = "axis");

  std::optional<NodeError> error;

private:
  mlir::FailureOr<mlir::Value> finish(mlir::Operation *op, bool infer);

  llvm::StringMap<OnnxValue> &values;
  ConstantPool &constants;
  std::function<std::string()> takeDiagnostics;
};

/// How one ONNX operator is imported: the function, and the oldest version
/// of the operator whose semantics it implements. A model whose opset gives
/// an older version of the operator is refused at that node, so each
/// operator follows its own version history rather than one opset range.
struct Converter {
  using Fn = std::function<mlir::LogicalResult(NodeContext &)>;
  Converter() = default;
  Converter(int64_t oldestVersion, Fn convert)
      : oldestVersion(oldestVersion), convert(std::move(convert)) {}

  int64_t oldestVersion = 0;
  Fn convert;
};

/// Adds the converters of each group to `table`, keyed by ONNX op type.
void addMathConverters(llvm::StringMap<Converter> &table);
void addTensorConverters(llvm::StringMap<Converter> &table);
void addNNConverters(llvm::StringMap<Converter> &table);
void addRNNConverters(llvm::StringMap<Converter> &table);
void addEinsumConverters(llvm::StringMap<Converter> &table);
void addNormConverters(llvm::StringMap<Converter> &table);
void addIndexConverters(llvm::StringMap<Converter> &table);
void addResizeConverters(llvm::StringMap<Converter> &table);

} // namespace loom::onnx_import

#endif // LOOM_COMPILER_ONNX_NODECONTEXT_H
