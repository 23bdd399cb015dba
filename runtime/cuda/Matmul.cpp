//===- Matmul.cpp - Batched matmul on cuBLASLt ----------------------------===//
//
// Loom's tensors are row-major and cuBLASLt's matrices column-major: a
// row-major [M, N] result is the column-major N x M matrix C^T = B^T A^T,
// so the rhs is cuBLASLt's first operand and the lhs its second, and the
// transpositions carry over unchanged. Batch dimensions that equal the
// result's, or that are all 1 (stride 0), make one strided-batched call;
// any other broadcast runs one call per result matrix. f32 computes in f32
// (TF32 with LOOM_CUDA_TF32=1); f16 and bf16 take tensor cores with f32
// accumulation. The heuristic's algorithm is cached per problem.
//
// fused_matmul adds its bias (a vector along the row-major result's last
// dimension: one value per row of the column-major D = C^T, which is how
// cuBLASLt's bias epilogue broadcasts) and applies relu in cuBLASLt's
// epilogue, while the product is in registers. A problem whose heuristic
// offers no algorithm with that epilogue runs the plain GEMM and then a
// separate pass.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaContext.h"

#include <cstdint>
#include <optional>

namespace loom::rt::cuda {
namespace {

const char *statusName(cublasStatus_t s) {
  switch (s) {
  case CUBLAS_STATUS_SUCCESS:
    return "success";
  case CUBLAS_STATUS_NOT_INITIALIZED:
    return "not initialized";
  case CUBLAS_STATUS_ALLOC_FAILED:
    return "allocation failed";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "invalid value";
  case CUBLAS_STATUS_ARCH_MISMATCH:
    return "architecture mismatch";
  case CUBLAS_STATUS_EXECUTION_FAILED:
    return "execution failed";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "not supported";
  default:
    return "internal error";
  }
}

/// The largest power of two (at most 256) dividing `p`.
uint32_t alignmentOf(const void *p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && v % a)
    a /= 2;
  return a;
}

/// One GEMM problem in cuBLASLt's column-major terms.
struct Gemm {
  cudaDataType_t type;
  int64_t m, n, k;
  bool transA, transB;
  int64_t lda, ldb, ldc;
  int32_t batch;
  int64_t strideA, strideB, strideC;
};

/// Destroys cuBLASLt descriptors on scope exit.
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Descriptors() {
    if (pref)
      cublasLtMatmulPreferenceDestroy(pref);
    if (c)
      cublasLtMatrixLayoutDestroy(c);
    if (b)
      cublasLtMatrixLayoutDestroy(b);
    if (a)
      cublasLtMatrixLayoutDestroy(a);
    if (op)
      cublasLtMatmulDescDestroy(op);
  }
};

cublasStatus_t makeLayout(cublasLtMatrixLayout_t &layout, cudaDataType_t type,
                          int64_t rows, int64_t cols, int64_t ld, int32_t batch,
                          int64_t stride) {
  cublasStatus_t s = cublasLtMatrixLayoutCreate(&layout, type, rows, cols, ld);
  if (s != CUBLAS_STATUS_SUCCESS || batch == 1)
    return s;
  s = cublasLtMatrixLayoutSetAttribute(
      layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch));
  if (s != CUBLAS_STATUS_SUCCESS)
    return s;
  return cublasLtMatrixLayoutSetAttribute(
      layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
      sizeof(stride));
}

/// A fused_matmul's epilogue: bias per row of D (column-major), then relu.
struct Epilogue {
  const void *bias = nullptr;
  bool relu = false;
};

/// D = op(A) op(B) on the context's stream, with `epilogue` when it is
/// given and cuBLASLt has an algorithm for it (`fused` says whether it
/// had; without one, the plain product).
std::string runGemm(CudaContext &ctx, const Gemm &g, const void *a,
                    const void *b, void *d, const Epilogue *epilogue = nullptr,
                    bool *fused = nullptr) {
  if (fused)
    *fused = false;
  Descriptors desc;
  cublasComputeType_t compute = g.type == CUDA_R_32F && ctx.tf32
                                    ? CUBLAS_COMPUTE_32F_FAST_TF32
                                    : CUBLAS_COMPUTE_32F;
  cublasStatus_t s = cublasLtMatmulDescCreate(&desc.op, compute, CUDA_R_32F);
  cublasOperation_t ta = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N,
                    tb = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSA,
                                       &ta, sizeof(ta));
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSB,
                                       &tb, sizeof(tb));
  cublasLtEpilogue_t mode = !epilogue        ? CUBLASLT_EPILOGUE_DEFAULT
                            : epilogue->relu ? CUBLASLT_EPILOGUE_RELU_BIAS
                                             : CUBLASLT_EPILOGUE_BIAS;
  if (s == CUBLAS_STATUS_SUCCESS && epilogue)
    s = cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                       &mode, sizeof(mode));
  if (s == CUBLAS_STATUS_SUCCESS && epilogue)
    s = cublasLtMatmulDescSetAttribute(desc.op,
                                       CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                       &epilogue->bias, sizeof(void *));
  if (s == CUBLAS_STATUS_SUCCESS)
    s = makeLayout(desc.a, g.type, g.transA ? g.k : g.m, g.transA ? g.m : g.k,
                   g.lda, g.batch, g.strideA);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = makeLayout(desc.b, g.type, g.transB ? g.n : g.k, g.transB ? g.k : g.n,
                   g.ldb, g.batch, g.strideB);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = makeLayout(desc.c, g.type, g.m, g.n, g.ldc, g.batch, g.strideC);
  if (s != CUBLAS_STATUS_SUCCESS)
    return std::string("cuBLASLt descriptors: ") + statusName(s);

  uint32_t alignA = alignmentOf(a), alignB = alignmentOf(b),
           alignD = alignmentOf(d);
  std::string key = std::to_string(g.type) + ":" + std::to_string(g.m) + "x" +
                    std::to_string(g.n) + "x" + std::to_string(g.k) + ":" +
                    std::to_string(g.transA) + std::to_string(g.transB) + ":" +
                    std::to_string(g.lda) + "," + std::to_string(g.ldb) + "," +
                    std::to_string(g.ldc) + ":" + std::to_string(g.batch) +
                    "," + std::to_string(g.strideA) + "," +
                    std::to_string(g.strideB) + ":" + std::to_string(alignA) +
                    "," + std::to_string(alignB) + "," +
                    std::to_string(alignD) + ":" + std::to_string(compute) +
                    ":" + std::to_string(mode) + "," +
                    std::to_string(epilogue ? alignmentOf(epilogue->bias) : 0);
  if (epilogue && ctx.unfusable.count(key))
    return runGemm(ctx, g, a, b, d);
  auto found = ctx.algorithms.find(key);
  if (found == ctx.algorithms.end()) {
    s = cublasLtMatmulPreferenceCreate(&desc.pref);
    size_t workspace = ctx.workspaceBytes;
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatmulPreferenceSetAttribute(
          desc.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
          sizeof(workspace));
    for (auto [attr, value] :
         {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignA},
          std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignB},
          std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignD},
          std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignD}})
      if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(desc.pref, attr, &value,
                                                 sizeof(value));
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatmulAlgoGetHeuristic(ctx.lt, desc.op, desc.a, desc.b,
                                         desc.c, desc.c, desc.pref, 1, &result,
                                         &returned);
    if (epilogue && (s != CUBLAS_STATUS_SUCCESS || returned == 0)) {
      ctx.unfusable.insert(key);
      return runGemm(ctx, g, a, b, d);
    }
    if (s != CUBLAS_STATUS_SUCCESS || returned == 0)
      return std::string("cuBLASLt has no algorithm for this matmul (") +
             statusName(s) + ")";
    found = ctx.algorithms.emplace(key, result.algo).first;
  }
  float alpha = 1.0f, beta = 0.0f;
  s = cublasLtMatmul(ctx.lt, desc.op, &alpha, a, desc.a, b, desc.b, &beta, d,
                     desc.c, d, desc.c, &found->second, ctx.workspace,
                     ctx.workspaceBytes, ctx.stream);
  if (s != CUBLAS_STATUS_SUCCESS)
    return std::string("cuBLASLt matmul: ") + statusName(s);
  if (fused)
    *fused = epilogue != nullptr;
  return "";
}

/// Strides (in matrices) of a batch shape read as `out`'s batch shape, and
/// whether it is the whole batch (stride 1 per matrix) or a single matrix.
std::vector<int64_t> batchStrides(const Shape &in, const Shape &out) {
  std::vector<int64_t> s(out.size(), 0);
  int64_t stride = 1;
  size_t lead = out.size() - in.size();
  for (size_t d = in.size(); d-- > 0;) {
    if (in[d] != 1)
      s[lead + d] = stride;
    stride *= in[d];
  }
  return s;
}

/// matmul, and fused_matmul (a third input, the bias, and `relu`).
std::string runMatmul(CudaContext &ctx, const KernelArgs &args) {
  const TensorView &lhs = args.inputs[0], &rhs = args.inputs[1],
                   &out = args.outputs[0];
  const std::string op(args.op);
  if (lhs.rank() < 2 || rhs.rank() < 2 || out.rank() < 2 ||
      lhs.dtype != rhs.dtype || lhs.dtype != out.dtype)
    return "cuda kernel '" + op + "' needs operands of rank >= 2 and one type";
  std::optional<Epilogue> epilogue;
  if (args.inputs.size() == 3) {
    const TensorView &bias = args.inputs[2];
    if (bias.rank() != 1 || bias.dtype != out.dtype ||
        bias.shape[0] != out.shape.back())
      return "cuda kernel 'fused_matmul': the bias " + formatShape(bias.shape) +
             " is not a vector of the result's last dimension";
    epilogue = Epilogue{bias.data, args.attrs.getBool("relu")};
  }
  // The epilogue as a separate pass, where cuBLASLt did not apply it.
  auto finish = [&](bool fused) -> std::string {
    if (epilogue && !fused)
      if (std::string e =
              launchBiasEpilogue(ctx, args.inputs[2], epilogue->relu, out);
          !e.empty())
        return e;
    return launchStatus(args.op);
  };
  cudaDataType_t type;
  size_t elem = dtypeSize(lhs.dtype);
  switch (lhs.dtype) {
  case DType::F32:
    type = CUDA_R_32F;
    break;
  case DType::F16:
    type = CUDA_R_16F;
    break;
  case DType::BF16:
    type = CUDA_R_16BF;
    break;
  default:
    return unsupportedType(args.op, lhs.dtype);
  }
  bool tl = args.attrs.getBool("transpose_lhs"),
       tr = args.attrs.getBool("transpose_rhs");
  int64_t lr = lhs.rank(), rr = rhs.rank(), orank = out.rank();
  int64_t M = tl ? lhs.shape[lr - 1] : lhs.shape[lr - 2];
  int64_t K = tl ? lhs.shape[lr - 2] : lhs.shape[lr - 1];
  int64_t K2 = tr ? rhs.shape[rr - 1] : rhs.shape[rr - 2];
  int64_t N = tr ? rhs.shape[rr - 2] : rhs.shape[rr - 1];
  if (K != K2 || out.shape[orank - 2] != M || out.shape[orank - 1] != N)
    return "cuda kernel 'matmul': shapes " + formatShape(lhs.shape) + " and " +
           formatShape(rhs.shape) + " do not give " + formatShape(out.shape);
  Shape outBatch(out.shape.begin(), out.shape.end() - 2),
      lhsBatch(lhs.shape.begin(), lhs.shape.end() - 2),
      rhsBatch(rhs.shape.begin(), rhs.shape.end() - 2);
  if (lhsBatch.size() > outBatch.size() || rhsBatch.size() > outBatch.size())
    return "cuda kernel 'matmul': the batch dimensions do not broadcast";
  int64_t batch = numElements(outBatch);
  if (M == 0 || N == 0 || batch == 0)
    return "";
  if (K == 0) {
    cudaMemsetAsync(out.data, 0, out.bytes(), ctx.stream);
    return finish(false);
  }
  Gemm g{type, N, M, K, tr, tl, tr ? K : N, tl ? M : K, N, 1, 0, 0, 0};
  int64_t lhsCount = numElements(lhsBatch), rhsCount = numElements(rhsBatch);
  bool lhsStrided = lhsCount == batch || lhsCount == 1;
  bool rhsStrided = rhsCount == batch || rhsCount == 1;
  // Full batches must also be laid out like the result's (no broadcast
  // inside them): equal counts imply equal shapes once padded with 1s.
  if (lhsStrided && rhsStrided && batch <= INT32_MAX) {
    g.batch = static_cast<int32_t>(batch);
    g.strideA = rhsCount == 1 ? 0 : K * N;
    g.strideB = lhsCount == 1 ? 0 : M * K;
    g.strideC = M * N;
    bool fused = false;
    std::string e = runGemm(ctx, g, rhs.data, lhs.data, out.data,
                            epilogue ? &*epilogue : nullptr, &fused);
    return e.empty() ? finish(fused) : "cuda kernel '" + op + "': " + e;
  }
  std::vector<int64_t> ls = batchStrides(lhsBatch, outBatch),
                       rs = batchStrides(rhsBatch, outBatch);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t rest = b, li = 0, ri = 0;
    for (size_t d = outBatch.size(); d-- > 0;) {
      int64_t i = rest % outBatch[d];
      rest /= outBatch[d];
      li += i * ls[d];
      ri += i * rs[d];
    }
    std::string e =
        runGemm(ctx, g, static_cast<const char *>(rhs.data) + ri * K * N * elem,
                static_cast<const char *>(lhs.data) + li * M * K * elem,
                static_cast<char *>(out.data) + b * M * N * elem);
    if (!e.empty())
      return "cuda kernel '" + op + "': " + e;
  }
  return finish(false);
}

} // namespace

void registerMatmulKernels(KernelTable &table) {
  table["matmul"] = {runMatmul, 2, 2};
  table["fused_matmul"] = {runMatmul, 3, 3};
}

} // namespace loom::rt::cuda
