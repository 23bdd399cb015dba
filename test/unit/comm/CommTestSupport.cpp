//===- CommTestSupport.cpp - Running ranks and plans in comm tests --------===//

#include "test/unit/comm/CommTestSupport.h"

#include <cstring>

namespace loom::commtest {

using layout::Step;
using layout::StepKind;

RankPool::RankPool(int64_t n) {
  for (int64_t r = 0; r < n; ++r)
    threads_.emplace_back([this, r] { loop(r); });
}

RankPool::~RankPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  start_.notify_all();
  for (std::thread &t : threads_)
    t.join();
}

void RankPool::run(const std::function<void(int64_t)> &job) {
  std::unique_lock<std::mutex> lock(mutex_);
  job_ = &job;
  running_ = static_cast<int64_t>(threads_.size());
  ++generation_;
  start_.notify_all();
  done_.wait(lock, [&] { return running_ == 0; });
  job_ = nullptr;
}

void RankPool::loop(int64_t rank) {
  uint64_t seen = 0;
  while (true) {
    const std::function<void(int64_t)> *job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_)
        return;
      seen = generation_;
      job = job_;
    }
    (*job)(rank);
    std::lock_guard<std::mutex> lock(mutex_);
    if (--running_ == 0)
      done_.notify_one();
  }
}

namespace {

/// The op name and attributes of the instruction executing `step`.
void translate(const Step &step, Instruction &inst) {
  auto set = [&](const char *name, int64_t value) {
    inst.attrs.set(name, value);
  };
  switch (step.kind) {
  case StepKind::AllReduce:
    inst.op = "all_reduce";
    inst.attrs.set("axes",
                   std::vector<int64_t>(step.axes.begin(), step.axes.end()));
    return;
  case StepKind::ReduceScatter:
    inst.op = "reduce_scatter";
    break;
  case StepKind::AllGather:
    inst.op = "all_gather";
    break;
  case StepKind::AllToAll:
    inst.op = "all_to_all";
    set("to_dim", step.toDim);
    break;
  case StepKind::LocalSplit:
    inst.op = "local_split";
    break;
  case StepKind::MakePartial:
    inst.op = "make_partial";
    set("axis", step.axis());
    return;
  }
  set("axis", step.axis());
  set("dim", step.dim);
}

/// Element `e` of rank `r`'s contribution in iteration `iter`, as a float
/// that is not exactly representable, so that summation order shows.
float floatValue(int64_t r, int64_t e, int64_t iter = 0) {
  return 0.1f * static_cast<float>(r + 1) + 0.37f * static_cast<float>(e) +
         0.013f * static_cast<float>(iter);
}

int64_t intValue(int64_t r, int64_t e, int64_t iter = 0) {
  return (r + 1) * 1000003 + e * 7 - iter * 31 + (int64_t(1) << 40);
}

/// The encoding of `v` as `dtype`; for the 16-bit types the rounded value.
std::vector<unsigned char> encodeFloat(const std::vector<float> &v,
                                       rt::DType dtype) {
  std::vector<unsigned char> bytes(v.size() * rt::dtypeSize(dtype));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == rt::DType::F32) {
      std::memcpy(bytes.data() + 4 * i, &v[i], 4);
    } else {
      uint16_t h = dtype == rt::DType::F16 ? rt::floatToHalf(v[i])
                                           : rt::floatToBf16(v[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  return bytes;
}

float decodeFloat(const unsigned char *p, rt::DType dtype) {
  if (dtype == rt::DType::F32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return dtype == rt::DType::F16 ? rt::halfToFloat(h) : rt::bf16ToFloat(h);
}

} // namespace

std::optional<std::vector<Instruction>>
lowerPlan(const layout::Mesh &mesh, const layout::RedistributionPlan &plan,
          const std::vector<int64_t> &globalShape, std::string &error) {
  std::vector<Instruction> result;
  layout::TensorLayout current = plan.source;
  for (const Step &step : plan.steps) {
    std::optional<layout::TensorLayout> next =
        layout::applyStep(mesh, current, step, globalShape, error);
    if (!next)
      return std::nullopt;
    Instruction inst;
    translate(step, inst);
    inst.inShape = current.localShape(mesh, globalShape);
    inst.outShape = next->localShape(mesh, globalShape);
    result.push_back(std::move(inst));
    current = *next;
  }
  if (current != plan.target) {
    error = "the steps end in " + current.toString(mesh) + ", not in " +
            plan.target.toString(mesh);
    return std::nullopt;
  }
  return result;
}

std::string runInstructions(rt::CollectiveRunner &runner,
                            const std::vector<Instruction> &instructions,
                            rt::DType dtype,
                            std::vector<unsigned char> &buffer) {
  std::vector<unsigned char> out;
  for (const Instruction &inst : instructions) {
    out.resize(rt::numElements(inst.outShape) * rt::dtypeSize(dtype));
    rt::TensorView in{dtype, inst.inShape, buffer.data()};
    rt::TensorView result{dtype, inst.outShape, out.data()};
    if (in.bytes() != buffer.size())
      return inst.op + ": the buffer holds " + std::to_string(buffer.size()) +
             " bytes, expected " + std::to_string(in.bytes());
    std::string error = runner.run(inst.op, inst.attrs, in, result);
    if (!error.empty())
      return error;
    buffer.swap(out);
  }
  return "";
}

std::vector<unsigned char> encode(const std::vector<int64_t> &values,
                                  rt::DType dtype) {
  std::vector<unsigned char> bytes(values.size() * rt::dtypeSize(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    unsigned char *p = bytes.data() + i * rt::dtypeSize(dtype);
    if (dtype == rt::DType::I64) {
      std::memcpy(p, &values[i], 8);
    } else if (dtype == rt::DType::I32) {
      int32_t v = static_cast<int32_t>(values[i]);
      std::memcpy(p, &v, 4);
    } else {
      float v = static_cast<float>(values[i]);
      std::memcpy(p, &v, 4);
    }
  }
  return bytes;
}

std::vector<int64_t> decode(const std::vector<unsigned char> &bytes,
                            rt::DType dtype) {
  std::vector<int64_t> values(bytes.size() / rt::dtypeSize(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    const unsigned char *p = bytes.data() + i * rt::dtypeSize(dtype);
    if (dtype == rt::DType::I64) {
      std::memcpy(&values[i], p, 8);
    } else if (dtype == rt::DType::I32) {
      int32_t v;
      std::memcpy(&v, p, 4);
      values[i] = v;
    } else {
      float v;
      std::memcpy(&v, p, 4);
      values[i] = static_cast<int64_t>(v);
    }
  }
  return values;
}

std::vector<unsigned char> contribution(rt::DType dtype, int64_t m,
                                        int64_t count, int64_t iter) {
  if (dtype == rt::DType::I64 || dtype == rt::DType::I32) {
    std::vector<int64_t> v(count);
    for (int64_t e = 0; e < count; ++e)
      v[e] = dtype == rt::DType::I64 ? intValue(m, e, iter)
                                     : intValue(m, e, iter) % 100000;
    return encode(v, dtype);
  }
  std::vector<float> v(count);
  for (int64_t e = 0; e < count; ++e)
    v[e] = floatValue(m, e, iter);
  return encodeFloat(v, dtype);
}

std::vector<unsigned char> memberOrderSum(rt::DType dtype, int64_t n,
                                          int64_t count, int64_t iter) {
  std::vector<std::vector<unsigned char>> in;
  for (int64_t m = 0; m < n; ++m)
    in.push_back(contribution(dtype, m, count, iter));
  if (dtype == rt::DType::I64 || dtype == rt::DType::I32) {
    std::vector<int64_t> sum(count, 0);
    for (int64_t m = 0; m < n; ++m) {
      std::vector<int64_t> v = decode(in[m], dtype);
      for (int64_t e = 0; e < count; ++e)
        sum[e] += v[e];
    }
    return encode(sum, dtype);
  }
  std::vector<float> sum(count);
  const size_t size = rt::dtypeSize(dtype);
  for (int64_t e = 0; e < count; ++e) {
    float acc = decodeFloat(in[0].data() + e * size, dtype);
    for (int64_t m = 1; m < n; ++m)
      acc += decodeFloat(in[m].data() + e * size, dtype);
    sum[e] = acc;
  }
  return encodeFloat(sum, dtype);
}

} // namespace loom::commtest
