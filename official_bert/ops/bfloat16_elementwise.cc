// The element-wise work of a bfloat16 training step around its products, one pass over memory
// each way (see bfloat16_elementwise.py for why and when it is used).
//
// Each kernel reads bfloat16 tensors, computes in float32 one row at a time (the row stays in
// the L1 cache) and rounds its results to bfloat16 once. The backward kernels recompute what
// the forward pass computed from its inputs instead of keeping it. Gradients of the biases and
// of the layer norms' weights are float32 sums over the rows, taken in a fixed order (blocks of
// rows, then the blocks in turn), so that they do not depend on the number of threads.
//
// Dropout keeps an element when a hash of its position in the tensor and of the seed is at least
// `rate * 2^32`, and scales what it keeps by `1 / (1 - rate)`: the mask of `cpu_xla.dropout`,
// bit for bit (MurmurHash3's finalizer, twice, keyed by the seed).

#define EIGEN_USE_THREADS

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/util/work_sharder.h"

#include "bfloat16_bits.h"

namespace official_bert {
namespace {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::shape_inference::InferenceContext;

// === Shapes ===

// Outputs shaped as the given inputs, in order.
std::function<absl::Status(InferenceContext*)> ShapedAsInputs(std::vector<int> inputs) {
  return [inputs](InferenceContext* context) {
    for (int output = 0; output < static_cast<int>(inputs.size()); ++output) {
      context->set_output(output, context->input(inputs[output]));
    }
    return absl::OkStatus();
  };
}

REGISTER_OP("BiasGeluBfloat16")
    .Input("inputs: bfloat16")
    .Input("bias: bfloat16")
    .Output("outputs: bfloat16")
    .Attr("approximate: bool")
    .SetShapeFn(ShapedAsInputs({0}));

REGISTER_OP("BiasGeluBfloat16Grad")
    .Input("upstream: bfloat16")
    .Input("inputs: bfloat16")
    .Input("bias: bfloat16")
    .Output("inputs_grad: bfloat16")
    .Output("bias_grad: bfloat16")
    .Attr("approximate: bool")
    .SetShapeFn(ShapedAsInputs({1, 2}));

REGISTER_OP("BiasGradBfloat16")
    .Input("upstream: bfloat16")
    .Output("bias_grad: bfloat16")
    .SetShapeFn([](InferenceContext* context) {
      context->set_output(0, context->Vector(context->Dim(context->input(0), -1)));
      return absl::OkStatus();
    });

REGISTER_OP("DropoutAddLayerNormBfloat16")
    .Input("inputs: bfloat16")
    .Input("bias: bfloat16")
    .Input("residual: bfloat16")
    .Input("gamma: float")
    .Input("beta: float")
    .Input("seed: int32")
    .Output("outputs: bfloat16")
    .Attr("epsilon: float")
    .Attr("rate: float")
    .SetShapeFn(ShapedAsInputs({0}));

REGISTER_OP("DropoutAddLayerNormBfloat16Grad")
    .Input("upstream: bfloat16")
    .Input("inputs: bfloat16")
    .Input("bias: bfloat16")
    .Input("residual: bfloat16")
    .Input("gamma: float")
    .Input("beta: float")
    .Input("seed: int32")
    .Output("inputs_grad: bfloat16")
    .Output("bias_grad: bfloat16")
    .Output("residual_grad: bfloat16")
    .Output("gamma_grad: float")
    .Output("beta_grad: float")
    .Attr("epsilon: float")
    .Attr("rate: float")
    .SetShapeFn(ShapedAsInputs({1, 2, 3, 4, 5}));

REGISTER_OP("MaskedSoftmaxDropoutBfloat16")
    .Input("scores: bfloat16")
    .Input("padding: float")
    .Input("seed: int32")
    .Output("probs: bfloat16")
    .Attr("scale: float")
    .Attr("rate: float")
    .SetShapeFn(ShapedAsInputs({0}));

REGISTER_OP("MaskedSoftmaxDropoutBfloat16Grad")
    .Input("upstream: bfloat16")
    .Input("scores: bfloat16")
    .Input("padding: float")
    .Input("seed: int32")
    .Output("scores_grad: bfloat16")
    .Attr("scale: float")
    .Attr("rate: float")
    .SetShapeFn(ShapedAsInputs({1}));

// === Functions that vectorize ===
//
// glibc's expf, and Eigen's functions as this build of TensorFlow's headers compiles them, run
// one element at a time (the softmax spent most of its time in `__expf_fma`). These are plain
// arithmetic that the compiler vectorizes, accurate to a few float32 units in the last place,
// far below bfloat16's rounding.

// e^x as 2^n e^r with |r| <= ln(2) / 2 and a degree-6 Taylor polynomial for e^r (relative error
// below 2e-7); 0 below -87 (where float32 turns subnormal), and e^88 above 88.
inline float Exp(float x) {
  const float clamped = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  // Adding and subtracting 1.5 * 2^23 rounds to the nearest integer.
  const float n = (clamped * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  // ln(2) in two parts, the first exact in float32, so that n * ln(2) is subtracted exactly.
  const float r = (clamped - n * 0.693145751953125f) - n * 1.428606765330187e-6f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t exponent = (static_cast<int32_t>(n) + 127) << 23;
  float two_to_n;
  std::memcpy(&two_to_n, &exponent, sizeof(two_to_n));
  return x < -87.0f ? 0.0f : p * two_to_n;
}

inline float Tanh(float x) { return 1.0f - 2.0f / (Exp(2.0f * x) + 1.0f); }

// Abramowitz and Stegun's 7.1.26 (absolute error below 1.5e-7).
inline float Erf(float x) {
  const float magnitude = x < 0.0f ? -x : x;
  const float t = 1.0f / (1.0f + 0.3275911f * magnitude);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const float value = 1.0f - p * t * Exp(-magnitude * magnitude);
  return x < 0.0f ? -value : value;
}

// === Dropout ===

inline uint32_t Mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  return x ^ (x >> 16);
}

struct DropoutMask {
  DropoutMask(const Tensor& seed, float rate) {
    const auto words = seed.flat<int32_t>();
    const uint32_t seed0 = static_cast<uint32_t>(words(0)), seed1 = static_cast<uint32_t>(words(1));
    key0 = Mix32(seed0 ^ Mix32(seed1 + 0x9e3779b9u));
    key1 = Mix32(seed1 ^ Mix32(seed0));
    threshold = static_cast<uint32_t>(static_cast<double>(rate) * 4294967296.0);
    scale = 1.0f / (1.0f - rate);
  }

  float scale;
  uint32_t key0, key1, threshold;
};

// The dropout factor of the element at `position` (its index in the tensor): 0, or `scale`.
// Keys and threshold are passed by value, so that loops calling it vectorize. At rate 0 the
// threshold is 0 and every factor is 1.
inline float DropoutFactor(int64_t position, uint32_t key0, uint32_t key1, uint32_t threshold,
                           float scale) {
  const uint32_t word = Mix32(Mix32(static_cast<uint32_t>(position) ^ key0) + key1);
  return word >= threshold ? scale : 0.0f;
}

// === Checks and helpers ===

const uint16_t* Bits(const Tensor& tensor) {
  return reinterpret_cast<const uint16_t*>(tensor.flat<::tensorflow::bfloat16>().data());
}

uint16_t* Bits(Tensor* tensor) {
  return reinterpret_cast<uint16_t*>(tensor->flat<::tensorflow::bfloat16>().data());
}

std::vector<float> Widened(const Tensor& vector) {
  const uint16_t* bits = Bits(vector);
  std::vector<float> values(vector.NumElements());
  for (size_t i = 0; i < values.size(); ++i) values[i] = FromBfloat16(bits[i]);
  return values;
}

// Checks that `inputs` has a last axis and that each of `same` has its shape and each of
// `vectors` the shape of that last axis; `seed` (or -1) must be an int32 [2].
absl::Status CheckShapes(OpKernelContext* context, const char* op, int inputs,
                         std::vector<int> same, std::vector<int> vectors, int seed) {
  const Tensor& x = context->input(inputs);
  if (x.dims() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", context->op_kernel().requested_input(inputs),
                                                   " must have a last axis, got a scalar"));
  }
  const int64_t width = x.dim_size(x.dims() - 1);
  for (int input : same) {
    if (context->input(input).shape() != x.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": ", context->op_kernel().requested_input(input), " has shape ",
          context->input(input).shape().DebugString(), ", but ",
          context->op_kernel().requested_input(inputs), " has ", x.shape().DebugString()));
    }
  }
  for (int input : vectors) {
    const Tensor& vector = context->input(input);
    if (vector.dims() != 1 || vector.dim_size(0) != width) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": ", context->op_kernel().requested_input(input), " must be [", width,
          "] (the last axis of ", context->op_kernel().requested_input(inputs), "), got ",
          vector.shape().DebugString()));
    }
  }
  if (seed >= 0 && context->input(seed).NumElements() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": seed must be an int32 [2], got ",
                                                   context->input(seed).shape().DebugString()));
  }
  return absl::OkStatus();
}

// Runs `row(r, scratch)` for each row in [0, rows) on the device's threads; `scratch` is a
// float buffer of `scratch_size` per thread.
void ForEachRow(OpKernelContext* context, int64_t rows, int64_t cost_per_row, int64_t scratch_size,
                const std::function<void(int64_t, float*)>& row) {
  const auto* threads = context->device()->tensorflow_cpu_worker_threads();
  ::tensorflow::Shard(threads->num_threads, threads->workers, rows, cost_per_row,
                      [&](int64_t begin, int64_t end) {
                        std::vector<float> scratch(scratch_size);
                        for (int64_t r = begin; r < end; ++r) row(r, scratch.data());
                      });
}

// As `ForEachRow`, and also returns `sums` float32 column sums of `width`: `row` adds into
// `partial` (sums * width floats, the partial sums of its block of rows).
std::vector<float> ForEachRowSummed(
    OpKernelContext* context, int64_t rows, int64_t cost_per_row, int64_t scratch_size,
    int sums, int64_t width, const std::function<void(int64_t, float*, float*)>& row) {
  const int64_t blocks = std::min<int64_t>(rows, 64);
  const int64_t rows_per_block = blocks ? (rows + blocks - 1) / blocks : 0;
  std::vector<float> partial(blocks * sums * width, 0.0f);
  const auto* threads = context->device()->tensorflow_cpu_worker_threads();
  ::tensorflow::Shard(threads->num_threads, threads->workers, blocks, cost_per_row * rows_per_block,
                      [&](int64_t begin, int64_t end) {
                        std::vector<float> scratch(scratch_size);
                        for (int64_t block = begin; block < end; ++block) {
                          float* block_sums = partial.data() + block * sums * width;
                          const int64_t last = std::min(rows, (block + 1) * rows_per_block);
                          for (int64_t r = block * rows_per_block; r < last; ++r) {
                            row(r, scratch.data(), block_sums);
                          }
                        }
                      });
  std::vector<float> total(sums * width, 0.0f);
  for (int64_t block = 0; block < blocks; ++block) {
    const float* block_sums = partial.data() + block * sums * width;
    for (int64_t i = 0; i < sums * width; ++i) total[i] += block_sums[i];
  }
  return total;
}

// A kernel whose two float attributes are read once, when it is constructed.
class TwoFloatAttributesOp : public OpKernel {
 public:
  TwoFloatAttributesOp(OpKernelConstruction* context, const char* first, const char* second)
      : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr(first, &first_));
    OP_REQUIRES_OK(context, context->GetAttr(second, &second_));
  }

 protected:
  float first_, second_;
};

// === Bias and GELU ===

constexpr float kSqrtTwoOverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
constexpr float kSqrtHalf = 0.7071067811865476f;
constexpr float kInverseSqrtTwoPi = 0.3989422804014327f;

// `u = x + bias` into `u`, and into `t` the tanh (or erf) term of GELU(u).
void GeluTerms(const uint16_t* __restrict x, const float* __restrict bias, int64_t width,
               bool approximate, float* __restrict u, float* __restrict t) {
  if (approximate) {
#pragma omp simd
    for (int64_t j = 0; j < width; ++j) {
      const float value = FromBfloat16(x[j]) + bias[j];
      u[j] = value;
      t[j] = Tanh(kSqrtTwoOverPi * (value + kCubic * (value * value * value)));
    }
  } else {
#pragma omp simd
    for (int64_t j = 0; j < width; ++j) {
      const float value = FromBfloat16(x[j]) + bias[j];
      u[j] = value;
      t[j] = Erf(value * kSqrtHalf);
    }
  }
}

class BiasGeluOp : public OpKernel {
 public:
  explicit BiasGeluOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("approximate", &approximate_));
  }

  void Compute(OpKernelContext* context) override {
    OP_REQUIRES_OK(context, CheckShapes(context, "BiasGeluBfloat16", 0, {}, {1}, -1));
    const Tensor& x = context->input(0);
    Tensor* y = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &y));
    const int64_t width = x.dim_size(x.dims() - 1);
    if (x.NumElements() == 0) return;
    const std::vector<float> bias = Widened(context->input(1));
    const uint16_t* in = Bits(x);
    uint16_t* out = Bits(y);
    ForEachRow(context, x.NumElements() / width, 40 * width, 2 * width, [&](int64_t r, float* u) {
      float* t = u + width;
      GeluTerms(in + r * width, bias.data(), width, approximate_, u, t);
      uint16_t* row = out + r * width;
#pragma omp simd
      for (int64_t j = 0; j < width; ++j) row[j] = ToBfloat16(0.5f * u[j] * (1.0f + t[j]));
    });
  }

 private:
  bool approximate_;
};

class BiasGeluGradOp : public OpKernel {
 public:
  explicit BiasGeluGradOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("approximate", &approximate_));
  }

  void Compute(OpKernelContext* context) override {
    OP_REQUIRES_OK(context, CheckShapes(context, "BiasGeluBfloat16Grad", 1, {0}, {2}, -1));
    const Tensor& x = context->input(1);
    Tensor *dx = nullptr, *dbias = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &dx));
    OP_REQUIRES_OK(context, context->allocate_output(1, context->input(2).shape(), &dbias));
    const int64_t width = x.dim_size(x.dims() - 1);
    const int64_t rows = width ? x.NumElements() / width : 0;
    const std::vector<float> bias = Widened(context->input(2));
    const uint16_t *in = Bits(x), *upstream = Bits(context->input(0));
    uint16_t* out = Bits(dx);
    const bool approximate = approximate_;
    const std::vector<float> bias_grad = ForEachRowSummed(
        context, rows, 60 * width, 3 * width, 1, width, [&](int64_t r, float* u, float* sums) {
          float *t = u + width, *e = u + 2 * width;
          GeluTerms(in + r * width, bias.data(), width, approximate, u, t);
          if (!approximate) {
#pragma omp simd
            for (int64_t j = 0; j < width; ++j) e[j] = Exp(-0.5f * u[j] * u[j]);
          }
          const uint16_t* dy = upstream + r * width;
          uint16_t* row = out + r * width;
#pragma omp simd
          for (int64_t j = 0; j < width; ++j) {
            // d/du of 0.5 u (1 + tanh(k (u + c u^3))), or of 0.5 u (1 + erf(u / sqrt(2))).
            const float slope =
                approximate ? 0.5f * (1.0f + t[j]) + 0.5f * u[j] * (1.0f - t[j] * t[j]) *
                                  kSqrtTwoOverPi * (1.0f + 3.0f * kCubic * u[j] * u[j])
                            : 0.5f * (1.0f + t[j]) + u[j] * kInverseSqrtTwoPi * e[j];
            const float grad = FromBfloat16(dy[j]) * slope;
            row[j] = ToBfloat16(grad);
            sums[j] += grad;
          }
        });
    uint16_t* bias_out = Bits(dbias);
    for (int64_t j = 0; j < width; ++j) bias_out[j] = ToBfloat16(bias_grad[j]);
  }

 private:
  bool approximate_;
};

// The bias gradient of `x + bias`: the upstream gradient's float32 sum over the rows.
class BiasGradOp : public OpKernel {
 public:
  explicit BiasGradOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& upstream = context->input(0);
    OP_REQUIRES(context, upstream.dims() >= 1,
                absl::InvalidArgumentError("BiasGradBfloat16: upstream must have a last axis, "
                                           "got a scalar"));
    const int64_t width = upstream.dim_size(upstream.dims() - 1);
    const int64_t rows = width ? upstream.NumElements() / width : 0;
    Tensor* grad = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, {width}, &grad));
    const uint16_t* in = Bits(upstream);
    const std::vector<float> sums = ForEachRowSummed(
        context, rows, 2 * width, 0, 1, width, [&](int64_t r, float*, float* __restrict sums) {
          const uint16_t* __restrict row = in + r * width;
#pragma omp simd
          for (int64_t j = 0; j < width; ++j) sums[j] += FromBfloat16(row[j]);
        });
    uint16_t* out = Bits(grad);
    for (int64_t j = 0; j < width; ++j) out[j] = ToBfloat16(sums[j]);
  }
};

// === Bias, dropout, residual sum and layer norm ===

// The sum `s = residual + dropout(x + bias)` of row `r` into `s`; returns the row's mean and,
// through `inverse_deviation`, 1 / sqrt(variance + epsilon).
float SublayerSum(const uint16_t* __restrict x, const uint16_t* __restrict residual,
                  const float* __restrict bias, const DropoutMask& mask, int64_t r, int64_t width,
                  float epsilon, float* __restrict s, float* inverse_deviation) {
  const int64_t first = r * width;
  const uint16_t* __restrict x_row = x + first;
  const uint16_t* __restrict residual_row = residual + first;
  const uint32_t key0 = mask.key0, key1 = mask.key1, threshold = mask.threshold;
  const float scale = mask.scale;
  float total = 0.0f;
#pragma omp simd reduction(+ : total)
  for (int64_t j = 0; j < width; ++j) {
    const float dropped = (FromBfloat16(x_row[j]) + bias[j]) *
                          DropoutFactor(first + j, key0, key1, threshold, scale);
    const float value = FromBfloat16(residual_row[j]) + dropped;
    s[j] = value;
    total += value;
  }
  const float mean = total / static_cast<float>(width);
  float squares = 0.0f;
#pragma omp simd reduction(+ : squares)
  for (int64_t j = 0; j < width; ++j) squares += (s[j] - mean) * (s[j] - mean);
  *inverse_deviation = 1.0f / std::sqrt(squares / static_cast<float>(width) + epsilon);
  return mean;
}

class DropoutAddLayerNormOp : public TwoFloatAttributesOp {
 public:
  explicit DropoutAddLayerNormOp(OpKernelConstruction* context)
      : TwoFloatAttributesOp(context, "epsilon", "rate") {}

  void Compute(OpKernelContext* context) override {
    OP_REQUIRES_OK(context,
                   CheckShapes(context, "DropoutAddLayerNormBfloat16", 0, {2}, {1, 3, 4}, 5));
    const Tensor& x = context->input(0);
    Tensor* y = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &y));
    const int64_t width = x.dim_size(x.dims() - 1);
    if (x.NumElements() == 0) return;
    const std::vector<float> bias = Widened(context->input(1));
    const float* gamma = context->input(3).flat<float>().data();
    const float* beta = context->input(4).flat<float>().data();
    const DropoutMask mask(context->input(5), second_);
    const uint16_t *in = Bits(x), *residual = Bits(context->input(2));
    uint16_t* out = Bits(y);
    const float epsilon = first_;
    ForEachRow(context, x.NumElements() / width, 30 * width, width, [&](int64_t r, float* s) {
      float inverse_deviation;
      const float mean =
          SublayerSum(in, residual, bias.data(), mask, r, width, epsilon, s, &inverse_deviation);
      uint16_t* row = out + r * width;
#pragma omp simd
      for (int64_t j = 0; j < width; ++j) {
        row[j] = ToBfloat16((s[j] - mean) * inverse_deviation * gamma[j] + beta[j]);
      }
    });
  }
};

// The gradients of row `r` of `layer_norm(residual + dropout(x + bias))` into `x_out` and
// `residual_out`, and added into `sums` (the bias's, gamma's and beta's, `width` each); `s` and
// `g` are scratch rows.
void SublayerGradRow(const uint16_t* __restrict upstream, const uint16_t* __restrict x,
                     const uint16_t* __restrict residual, const float* __restrict bias,
                     const float* __restrict gamma, const DropoutMask& mask, int64_t r,
                     int64_t width, float epsilon, float* __restrict s, float* __restrict g,
                     float* __restrict sums, uint16_t* __restrict x_out,
                     uint16_t* __restrict residual_out) {
  float inverse_deviation;
  const float mean = SublayerSum(x, residual, bias, mask, r, width, epsilon, s, &inverse_deviation);
  const int64_t first = r * width;
  const uint16_t* __restrict dy = upstream + first;
  float* __restrict bias_sums = sums;
  float* __restrict gamma_sums = sums + width;
  float* __restrict beta_sums = sums + 2 * width;
  float g_total = 0.0f, g_normalized = 0.0f;
#pragma omp simd reduction(+ : g_total, g_normalized)
  for (int64_t j = 0; j < width; ++j) {
    const float normalized = (s[j] - mean) * inverse_deviation;
    const float upstream_j = FromBfloat16(dy[j]);
    gamma_sums[j] += upstream_j * normalized;
    beta_sums[j] += upstream_j;
    g[j] = upstream_j * gamma[j];
    g_total += g[j];
    g_normalized += g[j] * normalized;
    s[j] = normalized;
  }
  const float g_mean = g_total / static_cast<float>(width);
  const float g_normalized_mean = g_normalized / static_cast<float>(width);
  const uint32_t key0 = mask.key0, key1 = mask.key1, threshold = mask.threshold;
  const float scale = mask.scale;
  uint16_t* __restrict x_row = x_out + first;
  uint16_t* __restrict residual_row = residual_out + first;
#pragma omp simd
  for (int64_t j = 0; j < width; ++j) {
    // The layer norm's input gradient, which the residual takes whole.
    const float sum_grad = inverse_deviation * (g[j] - g_mean - s[j] * g_normalized_mean);
    residual_row[j] = ToBfloat16(sum_grad);
    const float input_grad = sum_grad * DropoutFactor(first + j, key0, key1, threshold, scale);
    x_row[j] = ToBfloat16(input_grad);
    bias_sums[j] += input_grad;
  }
}

class DropoutAddLayerNormGradOp : public TwoFloatAttributesOp {
 public:
  explicit DropoutAddLayerNormGradOp(OpKernelConstruction* context)
      : TwoFloatAttributesOp(context, "epsilon", "rate") {}

  void Compute(OpKernelContext* context) override {
    OP_REQUIRES_OK(context, CheckShapes(context, "DropoutAddLayerNormBfloat16Grad", 1, {0, 3},
                                        {2, 4, 5}, 6));
    const Tensor& x = context->input(1);
    Tensor *dx = nullptr, *dbias = nullptr, *dresidual = nullptr, *dgamma = nullptr,
           *dbeta = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &dx));
    OP_REQUIRES_OK(context, context->allocate_output(1, context->input(2).shape(), &dbias));
    OP_REQUIRES_OK(context, context->allocate_output(2, x.shape(), &dresidual));
    OP_REQUIRES_OK(context, context->allocate_output(3, context->input(4).shape(), &dgamma));
    OP_REQUIRES_OK(context, context->allocate_output(4, context->input(5).shape(), &dbeta));
    const int64_t width = x.dim_size(x.dims() - 1);
    const int64_t rows = width ? x.NumElements() / width : 0;
    const std::vector<float> bias = Widened(context->input(2));
    const float* gamma = context->input(4).flat<float>().data();
    const DropoutMask mask(context->input(6), second_);
    const uint16_t *upstream = Bits(context->input(0)), *in = Bits(x),
                   *residual = Bits(context->input(3));
    uint16_t *x_out = Bits(dx), *residual_out = Bits(dresidual);
    const float epsilon = first_;
    // Sums: the bias's, gamma's and beta's gradients.
    const std::vector<float> sums = ForEachRowSummed(
        context, rows, 50 * width, 2 * width, 3, width,
        [&](int64_t r, float* s, float* block_sums) {
          SublayerGradRow(upstream, in, residual, bias.data(), gamma, mask, r, width, epsilon, s,
                          s + width, block_sums, x_out, residual_out);
        });
    uint16_t* bias_out = Bits(dbias);
    float* gamma_out = dgamma->flat<float>().data();
    float* beta_out = dbeta->flat<float>().data();
    for (int64_t j = 0; j < width; ++j) {
      bias_out[j] = ToBfloat16(sums[j]);
      gamma_out[j] = sums[width + j];
      beta_out[j] = sums[2 * width + j];
    }
  }
};

// === Attention softmax with scale, padding mask and dropout ===

// Checks scores [batch, heads, queries, keys] against padding [batch, keys].
absl::Status CheckAttentionShapes(OpKernelContext* context, const char* op, int scores, int padding,
                                  int seed) {
  const Tensor& s = context->input(scores);
  const Tensor& p = context->input(padding);
  if (s.dims() != 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": scores must be [batch, heads, queries, keys], got ", s.shape().DebugString()));
  }
  if (p.dims() != 2 || p.dim_size(0) != s.dim_size(0) || p.dim_size(1) != s.dim_size(3)) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": padding must be [batch, keys] = [", s.dim_size(0), ", ", s.dim_size(3),
                     "], got ", p.shape().DebugString()));
  }
  if (context->input(seed).NumElements() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": seed must be an int32 [2], got ",
                                                   context->input(seed).shape().DebugString()));
  }
  return absl::OkStatus();
}

// The softmax over row `r` of `scores * scale + padding` into `p` (before dropout).
void SoftmaxRow(const uint16_t* __restrict scores, const float* __restrict padding, int64_t r,
                int64_t keys, int64_t rows_per_batch, float scale, float* __restrict p) {
  const uint16_t* __restrict row = scores + r * keys;
  const float* __restrict pad = padding + (r / rows_per_batch) * keys;
  float largest = -INFINITY;
#pragma omp simd reduction(max : largest)
  for (int64_t j = 0; j < keys; ++j) {
    const float value = FromBfloat16(row[j]) * scale + pad[j];
    p[j] = value;
    largest = value > largest ? value : largest;
  }
  float total = 0.0f;
#pragma omp simd reduction(+ : total)
  for (int64_t j = 0; j < keys; ++j) {
    p[j] = Exp(p[j] - largest);
    total += p[j];
  }
  const float inverse_total = 1.0f / total;
#pragma omp simd
  for (int64_t j = 0; j < keys; ++j) p[j] *= inverse_total;
}

// Row `r` of the dropped softmax into `out`.
void SoftmaxDropoutRow(const uint16_t* __restrict scores, const float* __restrict padding,
                       const DropoutMask& mask, int64_t r, int64_t keys, int64_t rows_per_batch,
                       float scale, float* __restrict p, uint16_t* __restrict out) {
  SoftmaxRow(scores, padding, r, keys, rows_per_batch, scale, p);
  const int64_t first = r * keys;
  const uint32_t key0 = mask.key0, key1 = mask.key1, threshold = mask.threshold;
  const float keep_scale = mask.scale;
  uint16_t* __restrict row = out + first;
#pragma omp simd
  for (int64_t j = 0; j < keys; ++j) {
    row[j] = ToBfloat16(p[j] * DropoutFactor(first + j, key0, key1, threshold, keep_scale));
  }
}

// Row `r` of the scores' gradient into `out`; `p` and `dp` are scratch rows.
void SoftmaxDropoutGradRow(const uint16_t* __restrict upstream, const uint16_t* __restrict scores,
                           const float* __restrict padding, const DropoutMask& mask, int64_t r,
                           int64_t keys, int64_t rows_per_batch, float scale, float* __restrict p,
                           float* __restrict dp, uint16_t* __restrict out) {
  SoftmaxRow(scores, padding, r, keys, rows_per_batch, scale, p);
  const int64_t first = r * keys;
  const uint16_t* __restrict dy = upstream + first;
  const uint32_t key0 = mask.key0, key1 = mask.key1, threshold = mask.threshold;
  const float keep_scale = mask.scale;
  float weighted = 0.0f;
#pragma omp simd reduction(+ : weighted)
  for (int64_t j = 0; j < keys; ++j) {
    dp[j] = FromBfloat16(dy[j]) * DropoutFactor(first + j, key0, key1, threshold, keep_scale);
    weighted += dp[j] * p[j];
  }
  uint16_t* __restrict row = out + first;
#pragma omp simd
  for (int64_t j = 0; j < keys; ++j) row[j] = ToBfloat16(p[j] * (dp[j] - weighted) * scale);
}

class MaskedSoftmaxDropoutOp : public TwoFloatAttributesOp {
 public:
  explicit MaskedSoftmaxDropoutOp(OpKernelConstruction* context)
      : TwoFloatAttributesOp(context, "scale", "rate") {}

  void Compute(OpKernelContext* context) override {
    OP_REQUIRES_OK(context, CheckAttentionShapes(context, "MaskedSoftmaxDropoutBfloat16", 0, 1, 2));
    const Tensor& scores = context->input(0);
    Tensor* probs = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, scores.shape(), &probs));
    const int64_t keys = scores.dim_size(3);
    const int64_t rows_per_batch = scores.dim_size(1) * scores.dim_size(2);
    if (scores.NumElements() == 0) return;
    const DropoutMask mask(context->input(2), second_);
    const uint16_t* in = Bits(scores);
    const float* padding = context->input(1).flat<float>().data();
    uint16_t* out = Bits(probs);
    const float scale = first_;
    ForEachRow(context, scores.NumElements() / keys, 40 * keys, keys, [&](int64_t r, float* p) {
      SoftmaxDropoutRow(in, padding, mask, r, keys, rows_per_batch, scale, p, out);
    });
  }
};

class MaskedSoftmaxDropoutGradOp : public TwoFloatAttributesOp {
 public:
  explicit MaskedSoftmaxDropoutGradOp(OpKernelConstruction* context)
      : TwoFloatAttributesOp(context, "scale", "rate") {}

  void Compute(OpKernelContext* context) override {
    OP_REQUIRES_OK(context,
                   CheckAttentionShapes(context, "MaskedSoftmaxDropoutBfloat16Grad", 1, 2, 3));
    const Tensor& scores = context->input(1);
    OP_REQUIRES(context, context->input(0).shape() == scores.shape(),
                absl::InvalidArgumentError(absl::StrCat(
                    "MaskedSoftmaxDropoutBfloat16Grad: upstream has shape ",
                    context->input(0).shape().DebugString(), ", but scores has ",
                    scores.shape().DebugString())));
    Tensor* grad = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, scores.shape(), &grad));
    const int64_t keys = scores.dim_size(3);
    const int64_t rows_per_batch = scores.dim_size(1) * scores.dim_size(2);
    if (scores.NumElements() == 0) return;
    const DropoutMask mask(context->input(3), second_);
    const uint16_t *upstream = Bits(context->input(0)), *in = Bits(scores);
    const float* padding = context->input(2).flat<float>().data();
    uint16_t* out = Bits(grad);
    const float scale = first_;
    ForEachRow(context, scores.NumElements() / keys, 50 * keys, 2 * keys,
               [&](int64_t r, float* p) {
                 SoftmaxDropoutGradRow(upstream, in, padding, mask, r, keys, rows_per_batch,
                                       scale, p, p + keys, out);
               });
  }
};

using ::tensorflow::DEVICE_CPU;
REGISTER_KERNEL_BUILDER(Name("BiasGeluBfloat16").Device(DEVICE_CPU), BiasGeluOp);
REGISTER_KERNEL_BUILDER(Name("BiasGeluBfloat16Grad").Device(DEVICE_CPU), BiasGeluGradOp);
REGISTER_KERNEL_BUILDER(Name("BiasGradBfloat16").Device(DEVICE_CPU), BiasGradOp);
REGISTER_KERNEL_BUILDER(Name("DropoutAddLayerNormBfloat16").Device(DEVICE_CPU),
                        DropoutAddLayerNormOp);
REGISTER_KERNEL_BUILDER(Name("DropoutAddLayerNormBfloat16Grad").Device(DEVICE_CPU),
                        DropoutAddLayerNormGradOp);
REGISTER_KERNEL_BUILDER(Name("MaskedSoftmaxDropoutBfloat16").Device(DEVICE_CPU),
                        MaskedSoftmaxDropoutOp);
REGISTER_KERNEL_BUILDER(Name("MaskedSoftmaxDropoutBfloat16Grad").Device(DEVICE_CPU),
                        MaskedSoftmaxDropoutGradOp);

}  // namespace
}  // namespace official_bert
