//===- LoomAttrs.cpp - Mesh, layout and strategy attributes ---------------===//

#include "dialects/LoomDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace loom;

#define GET_ATTRDEF_CLASSES
#include "dialects/LoomAttrs.cpp.inc"
#include "dialects/LoomEnums.cpp.inc"

void LoomDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/LoomAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// MeshAttr
//===----------------------------------------------------------------------===//

int64_t MeshAttr::getNumDevices() const {
  int64_t n = 1;
  for (int64_t s : getAxisSizes())
    n *= s;
  return n;
}

std::optional<unsigned> MeshAttr::getAxisIndex(StringRef name) const {
  for (auto [i, axis] : llvm::enumerate(getAxisNames()))
    if (axis.getValue() == name)
      return i;
  return std::nullopt;
}

LogicalResult MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<StringAttr> names,
                               ArrayRef<int64_t> sizes) {
  if (names.empty())
    return emitError() << "mesh must have at least one axis";
  if (names.size() != sizes.size())
    return emitError() << "mesh has " << names.size() << " axis names but "
                       << sizes.size() << " sizes";
  llvm::StringSet<> seen;
  for (auto [name, size] : llvm::zip(names, sizes)) {
    if (!name || name.getValue().empty())
      return emitError() << "mesh axis name must not be empty";
    if (!seen.insert(name.getValue()).second)
      return emitError() << "mesh axis '" << name.getValue()
                         << "' appears twice";
    if (size < 1)
      return emitError() << "mesh axis '" << name.getValue() << "' has size "
                         << size << "; sizes must be at least 1";
  }
  int64_t devices = 1;
  for (int64_t size : sizes)
    if (__builtin_mul_overflow(devices, size, &devices) ||
        devices > kMaxDevices)
      return emitError() << "mesh has more than " << kMaxDevices << " devices";
  return success();
}

Attribute MeshAttr::parse(AsmParser &parser, Type) {
  SmallVector<StringAttr> names;
  SmallVector<int64_t> sizes;
  auto parseAxis = [&]() -> ParseResult {
    std::string name;
    int64_t size;
    if (parser.parseKeywordOrString(&name) || parser.parseEqual() ||
        parser.parseInteger(size))
      return failure();
    names.push_back(StringAttr::get(parser.getContext(), name));
    sizes.push_back(size);
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::LessGreater,
                                     parseAxis))
    return {};
  return parser.getChecked<MeshAttr>(parser.getContext(), names, sizes);
}

void MeshAttr::print(AsmPrinter &printer) const {
  printer << '<';
  llvm::interleaveComma(
      llvm::zip(getAxisNames(), getAxisSizes()), printer, [&](auto axis) {
        printer.printKeywordOrString(std::get<0>(axis).getValue());
        printer << " = " << std::get<1>(axis);
      });
  printer << '>';
}

//===----------------------------------------------------------------------===//
// TensorLayoutAttr
//===----------------------------------------------------------------------===//

static SmallVector<StringRef> axisNames(ArrayAttr list) {
  SmallVector<StringRef> out;
  for (Attribute a : list)
    out.push_back(cast<StringAttr>(a).getValue());
  return out;
}

SmallVector<StringRef> TensorLayoutAttr::getDimAxes(unsigned dim) const {
  return axisNames(cast<ArrayAttr>(getDims()[dim]));
}

SmallVector<StringRef> TensorLayoutAttr::getPartialAxes() const {
  return axisNames(getPartial());
}

int64_t TensorLayoutAttr::getSplitCount(unsigned dim) const {
  int64_t n = 1;
  for (StringRef axis : getDimAxes(dim))
    n *= getMesh().getAxisSizes()[*getMesh().getAxisIndex(axis)];
  return n;
}

LogicalResult
TensorLayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                         MeshAttr mesh, ArrayAttr dims, ArrayAttr partial) {
  if (!mesh)
    return emitError() << "layout needs a mesh";
  llvm::StringSet<> used;
  auto checkAxes = [&](Attribute list) -> LogicalResult {
    auto array = dyn_cast<ArrayAttr>(list);
    if (!array || !llvm::all_of(array, llvm::IsaPred<StringAttr>))
      return emitError() << "layout dimension entries must be lists of axis "
                            "names";
    for (Attribute a : array) {
      StringRef axis = cast<StringAttr>(a).getValue();
      if (!mesh.getAxisIndex(axis))
        return emitError() << "layout names axis '" << axis
                           << "' which is not an axis of the mesh";
      if (!used.insert(axis).second)
        return emitError() << "layout uses mesh axis '" << axis
                           << "' more than once";
    }
    return success();
  };
  for (Attribute d : dims)
    if (failed(checkAxes(d)))
      return failure();
  return checkAxes(partial);
}

LogicalResult TensorLayoutAttr::verifyForShape(
    ArrayRef<int64_t> shape,
    function_ref<InFlightDiagnostic()> emitError) const {
  if (shape.size() != getRank())
    return emitError() << "layout has rank " << getRank()
                       << " but the tensor has rank " << shape.size();
  for (unsigned d = 0; d < getRank(); ++d) {
    int64_t count = getSplitCount(d);
    if (shape[d] % count != 0)
      return emitError() << "layout splits dimension " << d << " (size "
                         << shape[d] << ") " << count
                         << " ways, which does not divide it";
  }
  return success();
}

/// Parses `[a, b]` into an array of string attributes.
static ParseResult parseAxisList(AsmParser &parser, ArrayAttr &out) {
  SmallVector<Attribute> axes;
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
        std::string name;
        if (parser.parseKeywordOrString(&name))
          return failure();
        axes.push_back(StringAttr::get(parser.getContext(), name));
        return success();
      }))
    return failure();
  out = ArrayAttr::get(parser.getContext(), axes);
  return success();
}

static void printAxisList(AsmPrinter &printer, ArrayAttr list) {
  printer << '[';
  llvm::interleaveComma(list, printer, [&](Attribute a) {
    printer.printKeywordOrString(cast<StringAttr>(a).getValue());
  });
  printer << ']';
}

Attribute TensorLayoutAttr::parse(AsmParser &parser, Type) {
  MLIRContext *ctx = parser.getContext();
  MeshAttr mesh;
  SmallVector<Attribute> dims;
  ArrayAttr partial = ArrayAttr::get(ctx, {});
  if (parser.parseLess() || parser.parseAttribute(mesh) || parser.parseComma())
    return {};
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
        ArrayAttr axes;
        if (parseAxisList(parser, axes))
          return failure();
        dims.push_back(axes);
        return success();
      }))
    return {};
  if (succeeded(parser.parseOptionalComma())) {
    if (parser.parseKeyword("partial") || parser.parseEqual() ||
        parseAxisList(parser, partial))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<TensorLayoutAttr>(
      ctx, mesh, ArrayAttr::get(ctx, dims), partial);
}

void TensorLayoutAttr::print(AsmPrinter &printer) const {
  printer << '<';
  printer.printAttribute(getMesh());
  printer << ", [";
  llvm::interleaveComma(getDims(), printer, [&](Attribute d) {
    printAxisList(printer, cast<ArrayAttr>(d));
  });
  printer << ']';
  if (!getPartial().empty()) {
    printer << ", partial = ";
    printAxisList(printer, getPartial());
  }
  printer << '>';
}

//===----------------------------------------------------------------------===//
// StrategyAttr
//===----------------------------------------------------------------------===//

LogicalResult StrategyAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   ArrayRef<DenseI64ArrayAttr> inputs,
                                   ArrayRef<DenseI64ArrayAttr> outputs) {
  if (inputs.empty())
    return emitError() << "strategy must give split counts for at least one "
                          "input";
  for (ArrayRef<DenseI64ArrayAttr> group : {inputs, outputs})
    for (DenseI64ArrayAttr counts : group) {
      if (!counts)
        return emitError() << "strategy entries must be integer lists";
      for (int64_t c : counts.asArrayRef())
        if (c < 1)
          return emitError() << "split count must be at least 1, got " << c;
    }
  return success();
}

static ParseResult parseCountLists(AsmParser &parser,
                                   SmallVectorImpl<DenseI64ArrayAttr> &out) {
  return parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
    SmallVector<int64_t> counts;
    if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
          return parser.parseInteger(counts.emplace_back());
        }))
      return failure();
    out.push_back(DenseI64ArrayAttr::get(parser.getContext(), counts));
    return success();
  });
}

static void printCountLists(AsmPrinter &printer,
                            ArrayRef<DenseI64ArrayAttr> lists) {
  printer << '[';
  llvm::interleaveComma(lists, printer, [&](DenseI64ArrayAttr counts) {
    printer << '[';
    llvm::interleaveComma(counts.asArrayRef(), printer);
    printer << ']';
  });
  printer << ']';
}

Attribute StrategyAttr::parse(AsmParser &parser, Type) {
  SmallVector<DenseI64ArrayAttr> inputs, outputs;
  if (parser.parseLess() || parseCountLists(parser, inputs))
    return {};
  if (succeeded(parser.parseOptionalArrow()) &&
      parseCountLists(parser, outputs))
    return {};
  if (parser.parseGreater())
    return {};
  return parser.getChecked<StrategyAttr>(parser.getContext(), inputs, outputs);
}

void StrategyAttr::print(AsmPrinter &printer) const {
  printer << '<';
  printCountLists(printer, getInputs());
  if (!getOutputs().empty()) {
    printer << " -> ";
    printCountLists(printer, getOutputs());
  }
  printer << '>';
}

//===----------------------------------------------------------------------===//
// Enum attributes: `<spelling>`, quoted where it is not a bare keyword
//===----------------------------------------------------------------------===//

/// Parses `<spelling>` into one of an enum's values, or says which
/// spellings it takes.
template <typename EnumT>
static std::optional<EnumT>
parseEnumBody(AsmParser &parser, StringRef what, StringRef spellings,
              std::optional<EnumT> (*symbolize)(StringRef)) {
  std::string spelling;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() || parser.parseKeywordOrString(&spelling))
    return std::nullopt;
  std::optional<EnumT> value = symbolize(spelling);
  if (!value) {
    parser.emitError(loc) << "expected " << what << " (" << spellings
                          << "), got '" << spelling << "'";
    return std::nullopt;
  }
  if (parser.parseGreater())
    return std::nullopt;
  return value;
}

Attribute PipelineScheduleAttr::parse(AsmParser &parser, Type) {
  auto value = parseEnumBody<PipelineSchedule>(parser, "a pipeline schedule",
                                               "gpipe, 1f1b or interleaved",
                                               symbolizePipelineSchedule);
  return value ? get(parser.getContext(), *value) : Attribute();
}

void PipelineScheduleAttr::print(AsmPrinter &printer) const {
  printer << '<';
  printer.printKeywordOrString(stringifyPipelineSchedule(getValue()));
  printer << '>';
}

Attribute HyperAttr::parse(AsmParser &parser, Type) {
  auto value = parseEnumBody<Hyper>(parser, "a per-step scalar", "lr or step",
                                    symbolizeHyper);
  return value ? get(parser.getContext(), *value) : Attribute();
}

void HyperAttr::print(AsmPrinter &printer) const {
  printer << '<';
  printer.printKeywordOrString(stringifyHyper(getValue()));
  printer << '>';
}
