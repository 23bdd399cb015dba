//===- TrainShapeCheckTest.cpp - Plan validation rules of training ops ----===//
//
// The op rules (common/ops/OpRules.h) that the runtime's plan validator
// applies, for the ops of
// dialects/LoomTrainOps.td: each accepts what the op's description allows
// and rejects operand/result counts, element types and shapes it does not,
// so that the kernels never see a plan that would make them index out of
// bounds. Also: the CPU backend has a kernel for every training op.
//
//===----------------------------------------------------------------------===//

#include "common/ops/OpRules.h"
#include "runtime/Backend.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <utility>

namespace loom::rt::test {
namespace {

using Type = std::pair<DType, Shape>;
constexpr DType F32 = DType::F32, F16 = DType::F16, I32 = DType::I32,
                I64 = DType::I64;

std::string check(const std::string &op, const Attrs &attrs,
                  const std::vector<Type> &operands,
                  const std::vector<Type> &results) {
  std::vector<ops::TypeRef> ops, res;
  for (const Type &t : operands)
    ops.push_back({t.first, &t.second});
  for (const Type &t : results)
    res.push_back({t.first, &t.second});
  return ops::checkOp(op, attrs, ops, res);
}

/// The mnemonics of the ops LoomTrainOps.td defines.
std::set<std::string> trainOps() {
  std::ifstream file(std::string(LOOM_SOURCE_DIR) +
                     "/dialects/LoomTrainOps.td");
  std::stringstream text;
  text << file.rdbuf();
  std::string td = text.str();
  std::set<std::string> ops;
  for (size_t pos = td.find("def Loom_"); pos != std::string::npos;
       pos = td.find("def Loom_", pos + 1)) {
    size_t angle = td.find("<\"", pos);
    size_t end = td.find('"', angle + 2);
    if (angle != std::string::npos && end != std::string::npos)
      ops.insert(td.substr(angle + 2, end - angle - 2));
  }
  return ops;
}

// Proves every training op of LoomTrainOps.td has a validation rule and a
// CPU kernel.
TEST(TrainShapeCheckTest, EveryTrainingOpHasARuleAndAKernel) {
  std::set<std::string> ops = trainOps();
  EXPECT_EQ(ops.size(), 19u) << "could not parse LoomTrainOps.td";
  auto backend = createCpuBackend();
  for (const std::string &op : ops) {
    EXPECT_EQ(check(op, Attrs(), {}, {}).find("unknown op"), std::string::npos)
        << op;
    EXPECT_NE(backend->findKernel(op), nullptr) << op;
  }
}

// Proves unary_grad takes input and grad of one float type, gives it, and
// names a function of common/ops/ElementwiseMath.h.
TEST(TrainShapeCheckTest, UnaryGrad) {
  Attrs elu;
  elu.set("fn", std::string("elu"));
  elu.set("alpha", 1.0);
  elu.set("beta", 0.0);
  EXPECT_EQ(
      check("unary_grad", elu, {{F32, {2, 3}}, {F32, {2, 3}}}, {{F32, {2, 3}}}),
      "");
  EXPECT_NE(
      check("unary_grad", elu, {{F32, {2, 3}}, {F32, {2, 4}}}, {{F32, {2, 3}}}),
      "");
  Attrs relu = elu;
  relu.set("fn", std::string("relu"));
  EXPECT_NE(
      check("unary_grad", relu, {{F32, {2, 3}}, {F32, {2, 3}}}, {{F32, {2, 3}}})
          .find("fn 'relu' is not one of"),
      std::string::npos);
}

// Proves reduce_max_grad needs the maximum and grad shaped like the
// reduction of its input, and gives the input's type.
TEST(TrainShapeCheckTest, ReduceMaxGrad) {
  Attrs keep;
  keep.set("axes", std::vector<int64_t>{1});
  keep.set("keep_dims", true);
  EXPECT_EQ(check("reduce_max_grad", keep,
                  {{F32, {2, 3}}, {F32, {2, 1}}, {F32, {2, 1}}},
                  {{F32, {2, 3}}}),
            "");
  // Without keep_dims the maximum is [2].
  Attrs drop;
  drop.set("axes", std::vector<int64_t>{1});
  EXPECT_EQ(check("reduce_max_grad", drop,
                  {{F32, {2, 3}}, {F32, {2}}, {F32, {2}}}, {{F32, {2, 3}}}),
            "");
  EXPECT_NE(check("reduce_max_grad", keep,
                  {{F32, {2, 3}}, {F32, {2}}, {F32, {2, 1}}}, {{F32, {2, 3}}}),
            "");
  EXPECT_NE(check("reduce_max_grad", keep,
                  {{F32, {2, 3}}, {F32, {2, 1}}, {F32, {1, 1}}},
                  {{F32, {2, 3}}}),
            "");
  EXPECT_NE(check("reduce_max_grad", keep,
                  {{F32, {2, 3}}, {F32, {2, 1}}, {F32, {2, 1}}},
                  {{F32, {3, 2}}}),
            "");
}

// Proves relu_grad/gelu_grad need input and grad of one float type, the
// result's.
TEST(TrainShapeCheckTest, ActivationGrads) {
  for (const char *op : {"relu_grad", "gelu_grad"}) {
    EXPECT_EQ(
        check(op, Attrs(), {{F32, {2, 3}}, {F32, {2, 3}}}, {{F32, {2, 3}}}),
        "");
    EXPECT_NE(check(op, Attrs(), {{F32, {2, 3}}, {F32, {3}}}, {{F32, {2, 3}}}),
              "");
    EXPECT_NE(
        check(op, Attrs(), {{F32, {2, 3}}, {F16, {2, 3}}}, {{F32, {2, 3}}}),
        "");
    EXPECT_NE(check(op, Attrs(), {{I32, {2}}, {I32, {2}}}, {{I32, {2}}}), "");
    EXPECT_NE(check(op, Attrs(), {{F32, {2}}, {F32, {2}}}, {{F32, {3}}}), "");
    EXPECT_NE(check(op, Attrs(), {{F32, {2}}}, {{F32, {2}}}), "");
  }
}

// Proves layer_norm_grad: scale is input.shape[axis:], grad the input's
// type, three results (input-typed, then two scale-typed).
TEST(TrainShapeCheckTest, LayerNormGrad) {
  Attrs a;
  a.set("axis", int64_t(1));
  a.set("epsilon", 1e-5);
  std::vector<Type> ops = {{F32, {4, 2, 3}}, {F32, {2, 3}}, {F32, {4, 2, 3}}};
  std::vector<Type> res = {{F32, {4, 2, 3}}, {F32, {2, 3}}, {F32, {2, 3}}};
  EXPECT_EQ(check("layer_norm_grad", a, ops, res), "");
  EXPECT_NE(check("layer_norm_grad", a, ops, {res[0], res[1]}), "");
  EXPECT_NE(check("layer_norm_grad", a, {ops[0], {F32, {3}}, ops[2]}, res), "");
  EXPECT_NE(
      check("layer_norm_grad", a, {ops[0], ops[1], {F32, {4, 2, 2}}}, res), "");
  EXPECT_NE(check("layer_norm_grad", a, ops, {res[0], res[1], {F32, {3}}}), "");
  EXPECT_NE(check("layer_norm_grad", a, ops, {res[0], {F16, {2, 3}}, res[2]}),
            "");
  a.set("axis", int64_t(3));
  EXPECT_NE(check("layer_norm_grad", a, ops, res), "");
}

// Proves gather_grad: grad is result.shape[:axis] + indices.shape +
// result.shape[axis+1:] of the result's type, indices integers.
TEST(TrainShapeCheckTest, GatherGrad) {
  Attrs a;
  a.set("axis", int64_t(1));
  EXPECT_EQ(check("gather_grad", a, {{I64, {2, 3}}, {F32, {4, 2, 3, 5}}},
                  {{F32, {4, 7, 5}}}),
            "");
  EXPECT_EQ(
      check("gather_grad", a, {{I32, {}}, {F16, {4, 5}}}, {{F16, {4, 7, 5}}}),
      "");
  EXPECT_NE(check("gather_grad", a, {{I64, {2, 3}}, {F32, {4, 6, 5}}},
                  {{F32, {4, 7, 5}}}),
            "");
  EXPECT_NE(check("gather_grad", a, {{F32, {2}}, {F32, {4, 2, 5}}},
                  {{F32, {4, 7, 5}}}),
            "");
  EXPECT_NE(check("gather_grad", a, {{I32, {2}}, {F16, {4, 2, 5}}},
                  {{F32, {4, 7, 5}}}),
            "");
  a.set("axis", int64_t(3));
  EXPECT_NE(check("gather_grad", a, {{I32, {2}}, {F32, {4, 7, 5}}},
                  {{F32, {4, 7, 5}}}),
            "");
}

// Proves slice_grad: every position written (starts + i * strides, any
// sign) lies inside the result; strides not zero; one element type.
TEST(TrainShapeCheckTest, SliceGrad) {
  auto attrs = [](std::vector<int64_t> starts, std::vector<int64_t> strides) {
    Attrs a;
    a.set("starts", starts);
    a.set("strides", strides);
    return a;
  };
  EXPECT_EQ(check("slice_grad", attrs({1}, {3}), {{F32, {3}}}, {{F32, {10}}}),
            "");
  EXPECT_EQ(check("slice_grad", attrs({5, 4}, {-2, -1}), {{F32, {3, 5}}},
                  {{F32, {6, 5}}}),
            "");
  EXPECT_NE(check("slice_grad", attrs({1}, {3}), {{F32, {4}}}, {{F32, {10}}}),
            "");
  EXPECT_NE(check("slice_grad", attrs({1}, {-1}), {{F32, {3}}}, {{F32, {10}}}),
            "");
  EXPECT_NE(check("slice_grad", attrs({1}, {0}), {{F32, {3}}}, {{F32, {10}}}),
            "");
  EXPECT_NE(check("slice_grad", attrs({1}, {1}), {{F16, {3}}}, {{F32, {10}}}),
            "");
  EXPECT_NE(
      check("slice_grad", attrs({1, 0}, {1, 1}), {{F32, {3}}}, {{F32, {10}}}),
      "");
}

// Proves softmax_cross_entropy_grad: logits [N, C], labels [N] integers,
// grad a scalar of the logits' type; the result has the logits' type.
TEST(TrainShapeCheckTest, SoftmaxCrossEntropyGrad) {
  Attrs a;
  a.set("ignore_index", int64_t(-100));
  const char *op = "softmax_cross_entropy_grad";
  EXPECT_EQ(
      check(op, a, {{F32, {8, 5}}, {I64, {8}}, {F32, {}}}, {{F32, {8, 5}}}),
      "");
  EXPECT_NE(
      check(op, a, {{F32, {8, 5}}, {I64, {8}}, {F32, {1}}}, {{F32, {8, 5}}}),
      "");
  EXPECT_NE(
      check(op, a, {{F32, {8, 5}}, {F32, {8}}, {F32, {}}}, {{F32, {8, 5}}}),
      "");
  EXPECT_NE(
      check(op, a, {{F32, {8, 5}}, {I32, {7}}, {F32, {}}}, {{F32, {8, 5}}}),
      "");
  EXPECT_NE(
      check(op, a, {{F32, {8, 5}}, {I32, {8}}, {F32, {}}}, {{F16, {8, 5}}}),
      "");
}

Attrs convAttrs(int64_t groups, std::vector<int64_t> strides = {1, 1},
                std::vector<int64_t> padding = {0, 0, 0, 0}) {
  Attrs a;
  a.set("strides", strides);
  a.set("padding", padding);
  a.set("dilations", std::vector<int64_t>{1, 1});
  a.set("groups", groups);
  return a;
}

// Proves conv2d_grad_input/_weight: conv2d of the result-shaped input (or
// weight) with these attributes must give grad's type; groups must fit.
TEST(TrainShapeCheckTest, ConvGrads) {
  Attrs a = convAttrs(2, {2, 2}, {1, 1, 0, 0});
  // input [1, 4, 7, 7], weight [6, 2, 3, 3] -> [1, 6, 3, 3]
  EXPECT_EQ(check("conv2d_grad_input", a,
                  {{F32, {1, 6, 3, 3}}, {F32, {6, 2, 3, 3}}},
                  {{F32, {1, 4, 7, 7}}}),
            "");
  EXPECT_EQ(check("conv2d_grad_input", a,
                  {{F32, {1, 6, 3, 3}}, {F32, {6, 2, 3, 3}}},
                  {{F32, {1, 4, 6, 6}}}),
            ""); // floor: an input row no window reads
  EXPECT_NE(check("conv2d_grad_input", a,
                  {{F32, {1, 6, 4, 4}}, {F32, {6, 2, 3, 3}}},
                  {{F32, {1, 4, 7, 7}}}),
            "");
  EXPECT_NE(check("conv2d_grad_input", a,
                  {{F32, {1, 6, 3, 3}}, {F32, {6, 4, 3, 3}}},
                  {{F32, {1, 4, 7, 7}}}),
            "");
  EXPECT_NE(check("conv2d_grad_input", a,
                  {{F16, {1, 6, 3, 3}}, {F32, {6, 2, 3, 3}}},
                  {{F32, {1, 4, 7, 7}}}),
            "");
  EXPECT_EQ(check("conv2d_grad_weight", a,
                  {{F32, {1, 4, 7, 7}}, {F32, {1, 6, 3, 3}}},
                  {{F32, {6, 2, 3, 3}}}),
            "");
  EXPECT_NE(check("conv2d_grad_weight", a,
                  {{F32, {1, 4, 7, 7}}, {F32, {1, 6, 3, 3}}},
                  {{F32, {6, 2, 2, 2}}}),
            "");
  EXPECT_NE(check("conv2d_grad_weight", a,
                  {{F32, {1, 4, 7, 7}}, {F32, {1, 6, 3, 3}}},
                  {{F32, {6, 4, 3, 3}}}),
            "");
  EXPECT_NE(check("conv2d_grad_weight", convAttrs(0),
                  {{F32, {1, 4, 7, 7}}, {F32, {1, 6, 5, 5}}},
                  {{F32, {6, 2, 3, 3}}}),
            "");
}

Attrs poolAttrs(bool ceil) {
  Attrs a;
  a.set("kernel", std::vector<int64_t>{3, 3});
  a.set("strides", std::vector<int64_t>{2, 2});
  a.set("padding", std::vector<int64_t>{1, 1, 1, 1});
  a.set("dilations", std::vector<int64_t>{1, 1});
  a.set("ceil_mode", ceil);
  return a;
}

// Proves max_pool2d_grad/avg_pool2d_grad: pooling of the input (result)
// must give grad's type, ceil mode included; the result has the input's.
TEST(TrainShapeCheckTest, PoolGrads) {
  // 8x8, k3 s2 p1: floor 4, ceil 5 (the last window starts at 8 = in + pb -1).
  EXPECT_EQ(check("max_pool2d_grad", poolAttrs(false),
                  {{F32, {1, 2, 8, 8}}, {F32, {1, 2, 4, 4}}},
                  {{F32, {1, 2, 8, 8}}}),
            "");
  EXPECT_NE(check("max_pool2d_grad", poolAttrs(true),
                  {{F32, {1, 2, 8, 8}}, {F32, {1, 2, 4, 4}}},
                  {{F32, {1, 2, 8, 8}}}),
            "");
  EXPECT_NE(check("max_pool2d_grad", poolAttrs(false),
                  {{F32, {1, 2, 8, 8}}, {F32, {1, 2, 4, 4}}},
                  {{F32, {1, 2, 8, 7}}}),
            "");
  EXPECT_NE(check("max_pool2d_grad", poolAttrs(false),
                  {{F32, {1, 2, 8, 8}}, {F16, {1, 2, 4, 4}}},
                  {{F32, {1, 2, 8, 8}}}),
            "");
  EXPECT_EQ(check("avg_pool2d_grad", poolAttrs(false), {{F32, {1, 2, 4, 4}}},
                  {{F32, {1, 2, 8, 8}}}),
            "");
  EXPECT_EQ(check("avg_pool2d_grad", poolAttrs(false), {{F32, {1, 2, 4, 4}}},
                  {{F32, {1, 2, 7, 7}}}),
            "");
  EXPECT_NE(check("avg_pool2d_grad", poolAttrs(false), {{F32, {1, 2, 5, 4}}},
                  {{F32, {1, 2, 8, 8}}}),
            "");
  EXPECT_NE(check("avg_pool2d_grad", poolAttrs(false), {{F32, {1, 2, 4, 4}}},
                  {{I32, {1, 2, 8, 8}}}),
            "");
}

// Proves the optimizer rules: state tensors share param's float type, lr
// and step are rank-0 of that element type, and the result counts are 1, 2
// and 3 with param's type.
TEST(TrainShapeCheckTest, OptimizerUpdates) {
  Type p{F32, {3, 4}}, s{F32, {}};
  // The attributes each update's schema requires.
  Attrs sgd, momentum, adam;
  sgd.set("weight_decay", 0.0);
  momentum.set("weight_decay", 0.0);
  momentum.set("momentum", 0.9);
  adam.set("weight_decay", 0.0);
  adam.set("beta1", 0.9);
  adam.set("beta2", 0.999);
  adam.set("epsilon", 1e-8);
  EXPECT_EQ(check("sgd_update", sgd, {p, p, s}, {p}), "");
  EXPECT_NE(check("sgd_update", sgd, {p, p, {F32, {1}}}, {p}), "");
  EXPECT_NE(check("sgd_update", sgd, {p, {F32, {4, 3}}, s}, {p}), "");
  EXPECT_NE(check("sgd_update", sgd, {p, p, {F16, {}}}, {p}), "");
  EXPECT_NE(check("sgd_update", sgd, {{I32, {3}}, {I32, {3}}, {I32, {}}},
                  {{I32, {3}}}),
            "");
  EXPECT_EQ(check("momentum_update", momentum, {p, p, p, s}, {p, p}), "");
  EXPECT_NE(check("momentum_update", momentum, {p, p, p, s}, {p}), "");
  EXPECT_NE(check("momentum_update", momentum, {p, p, {F32, {3}}, s}, {p, p}),
            "");
  EXPECT_EQ(check("adam_update", adam, {p, p, p, p, s, s}, {p, p, p}), "");
  EXPECT_NE(check("adam_update", adam, {p, p, p, p, s, {F16, {}}}, {p, p, p}),
            "");
  EXPECT_NE(check("adam_update", adam, {p, p, p, p, s, s}, {p, p, {F32, {3}}}),
            "");
  EXPECT_NE(check("adam_update", adam, {p, p, p, p, s}, {p, p, p}), "");
}

// Proves the forward rules factored into shared helpers (slice window,
// conv2d and pool2d output shapes) still accept and reject as before.
TEST(TrainShapeCheckTest, SharedForwardRulesUnchanged) {
  Attrs slice;
  slice.set("starts", std::vector<int64_t>{1});
  slice.set("sizes", std::vector<int64_t>{3});
  slice.set("strides", std::vector<int64_t>{2});
  EXPECT_EQ(check("slice", slice, {{F32, {6}}}, {{F32, {3}}}), "");
  EXPECT_NE(check("slice", slice, {{F32, {5}}}, {{F32, {3}}}), "");
  Attrs conv = convAttrs(2, {2, 2}, {1, 1, 0, 0});
  EXPECT_EQ(check("conv2d", conv, {{F32, {1, 4, 7, 7}}, {F32, {6, 2, 3, 3}}},
                  {{F32, {1, 6, 3, 3}}}),
            "");
  EXPECT_EQ(check("conv2d", conv,
                  {{F32, {1, 4, 7, 7}}, {F32, {6, 2, 3, 3}}, {F32, {6}}},
                  {{F32, {1, 6, 3, 3}}}),
            "");
  EXPECT_NE(check("conv2d", conv,
                  {{F32, {1, 4, 7, 7}}, {F32, {6, 2, 3, 3}}, {F32, {4}}},
                  {{F32, {1, 6, 3, 3}}}),
            "");
  EXPECT_EQ(check("max_pool2d", poolAttrs(true), {{F32, {1, 2, 8, 8}}},
                  {{F32, {1, 2, 5, 5}}}),
            "");
  EXPECT_NE(check("avg_pool2d", poolAttrs(true), {{F32, {1, 2, 8, 8}}},
                  {{F32, {1, 2, 4, 4}}}),
            "");
}

} // namespace
} // namespace loom::rt::test
