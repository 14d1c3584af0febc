// The original BERT's AdamW step for one float32 weight trained through a bfloat16 copy, as one
// pass over memory (see adam_update.py for why and when it is used).
//
// Per element, with g the bfloat16 gradient (plus the float32 rows of a sparse gradient, if any)
// times `gradient_scale`:
//
//   m = m + (g - m) * first_moment_rate          (1 - beta_1)
//   v = v + (g * g - v) * second_moment_rate     (1 - beta_2)
//   w = w - (w * weight_decay) * learning_rate
//   w = w - learning_rate * (m / (sqrt(v) + epsilon))
//   copy = bfloat16(w), rounded to nearest, ties to even
//
// with each operation rounded to float32 in this order (no fused multiply-adds: the library is
// built with -ffp-contract=off), as `AdamWeightDecay` under Keras' decoupled decay computes it.
//
// `SquaredNormBfloat16` gives the float32 sum of squares of one bfloat16 gradient, for the global
// norm the update clips by, summed in blocks of fixed size and then over the blocks in order, so
// that it does not depend on the number of threads.

#define EIGEN_USE_THREADS

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/kernels/training_op_helpers.h"
#include "tensorflow/core/util/work_sharder.h"

#include "bfloat16_bits.h"

namespace official_bert {
namespace {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using CPUDevice = Eigen::ThreadPoolDevice;

REGISTER_OP("AdamWeightDecayBfloat16Update")
    .Input("variable: resource")
    .Input("m: resource")
    .Input("v: resource")
    .Input("copy: resource")
    .Input("gradient: bfloat16")
    .Input("rows: int32")
    .Input("row_gradients: float")
    .Input("learning_rate: float")
    .Input("gradient_scale: float")
    .Attr("first_moment_rate: float")
    .Attr("second_moment_rate: float")
    .Attr("epsilon: float")
    .Attr("weight_decay: float")
    .SetIsStateful()  // it writes its variables and returns nothing: never pruned or merged
    .SetShapeFn(::tensorflow::shape_inference::NoOutputs);

REGISTER_OP("SquaredNormBfloat16")
    .Input("tensor: bfloat16")
    .Output("squared_norm: float")
    .SetShapeFn(::tensorflow::shape_inference::ScalarShape);

class AdamWeightDecayBfloat16UpdateOp : public OpKernel {
 public:
  explicit AdamWeightDecayBfloat16UpdateOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("first_moment_rate", &first_moment_rate_));
    OP_REQUIRES_OK(context, context->GetAttr("second_moment_rate", &second_moment_rate_));
    OP_REQUIRES_OK(context, context->GetAttr("epsilon", &epsilon_));
    OP_REQUIRES_OK(context, context->GetAttr("weight_decay", &weight_decay_));
  }

  void Compute(OpKernelContext* context) override {
    auto locks = ::tensorflow::MaybeLockVariableInputMutexesInOrder<CPUDevice, float>(
        context, /*do_lock=*/true, /*sparse=*/false, {0, 1, 2, 3});
    Tensor variable, m, v, copy;
    OP_REQUIRES_OK(context, ::tensorflow::GetInputTensorFromVariable<CPUDevice, float>(
                                context, 0, /*lock_held=*/true, /*sparse=*/false, &variable));
    OP_REQUIRES_OK(context, ::tensorflow::GetInputTensorFromVariable<CPUDevice, float>(
                                context, 1, true, false, &m));
    OP_REQUIRES_OK(context, ::tensorflow::GetInputTensorFromVariable<CPUDevice, float>(
                                context, 2, true, false, &v));
    OP_REQUIRES_OK(context,
                   ::tensorflow::GetInputTensorFromVariable<CPUDevice, ::tensorflow::bfloat16>(
                       context, 3, true, false, &copy));
    const Tensor& gradient = context->input(4);
    const Tensor& rows = context->input(5);
    const Tensor& row_gradients = context->input(6);
    for (const Tensor* state : {&std::as_const(m), &std::as_const(v), &std::as_const(copy),
                                &gradient}) {
      OP_REQUIRES(context, state->shape() == variable.shape(),
                  absl::InvalidArgumentError(absl::StrCat(
                      "AdamWeightDecayBfloat16Update: the variable's shape is ",
                      variable.shape().DebugString(), ", but a slot, copy or gradient has ",
                      state->shape().DebugString())));
    }
    for (int input : {7, 8}) {
      OP_REQUIRES(context, ::tensorflow::TensorShapeUtils::IsScalar(context->input(input).shape()),
                  absl::InvalidArgumentError(absl::StrCat(
                      "AdamWeightDecayBfloat16Update: learning_rate and gradient_scale must be "
                      "scalars, got ", context->input(input).shape().DebugString())));
    }
    OP_REQUIRES(context, rows.dims() == 1,
                absl::InvalidArgumentError(absl::StrCat(
                    "AdamWeightDecayBfloat16Update: rows must be a vector, got ",
                    rows.shape().DebugString())));
    const int64_t size = variable.NumElements();
    const int64_t width = variable.dims() > 0 ? variable.dim_size(variable.dims() - 1) : 1;
    const int64_t height = width > 0 ? size / width : 0;
    const int64_t num_rows = rows.NumElements();
    OP_REQUIRES(context,
                row_gradients.dims() == 2 && row_gradients.dim_size(0) == num_rows &&
                    (num_rows == 0 || row_gradients.dim_size(1) == width),
                absl::InvalidArgumentError(absl::StrCat(
                    "AdamWeightDecayBfloat16Update: row_gradients must be [", num_rows, ", ",
                    width, "], got ", row_gradients.shape().DebugString())));
    // For each row of the variable, the row of `row_gradients` to add to it, or -1.
    std::vector<int64_t> extra(num_rows ? height : 0, -1);
    const auto row_ids = rows.flat<int32_t>();
    for (int64_t i = 0; i < num_rows; ++i) {
      const int32_t row = row_ids(i);
      OP_REQUIRES(context, row >= 0 && row < height && extra[row] < 0,
                  absl::InvalidArgumentError(absl::StrCat(
                      "AdamWeightDecayBfloat16Update: rows[", i, "] = ", row,
                      " is outside [0, ", height, ") or repeated")));
      extra[row] = i;
    }

    float* weights = variable.flat<float>().data();
    float* first = m.flat<float>().data();
    float* second = v.flat<float>().data();
    uint16_t* copies = reinterpret_cast<uint16_t*>(copy.flat<::tensorflow::bfloat16>().data());
    const uint16_t* grads =
        reinterpret_cast<const uint16_t*>(gradient.flat<::tensorflow::bfloat16>().data());
    const float* row_grads = row_gradients.flat<float>().data();
    const float learning_rate = context->input(7).scalar<float>()();
    const float scale = context->input(8).scalar<float>()();
    const float rate_1 = first_moment_rate_, rate_2 = second_moment_rate_;
    const float epsilon = epsilon_, weight_decay = weight_decay_;

    // One row of `width` elements from `begin`, with `added` (or nullptr) added to its gradient.
    auto update = [&](int64_t begin, int64_t count, const float* added) {
      float* w = weights + begin;
      float* mm = first + begin;
      float* vv = second + begin;
      uint16_t* c = copies + begin;
      const uint16_t* g = grads + begin;
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) {
        const float grad = (FromBfloat16(g[i]) + (added ? added[i] : 0.0f)) * scale;
        const float m_new = mm[i] + (grad - mm[i]) * rate_1;
        const float v_new = vv[i] + (grad * grad - vv[i]) * rate_2;
        float w_new = w[i] - (w[i] * weight_decay) * learning_rate;
        w_new = w_new - learning_rate * (m_new / (std::sqrt(v_new) + epsilon));
        mm[i] = m_new;
        vv[i] = v_new;
        w[i] = w_new;
        c[i] = ToBfloat16(w_new);
      }
    };
    auto* workers = context->device()->tensorflow_cpu_worker_threads()->workers;
    const int threads = context->device()->tensorflow_cpu_worker_threads()->num_threads;
    // About 50 cycles an element: two loads and stores of float32 state, a square root and a
    // division.
    if (num_rows == 0) {
      ::tensorflow::Shard(threads, workers, size, 50, [&](int64_t begin, int64_t end) {
        update(begin, end - begin, nullptr);
      });
    } else {
      ::tensorflow::Shard(threads, workers, height, 50 * width, [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          update(row * width, width, extra[row] < 0 ? nullptr : row_grads + extra[row] * width);
        }
      });
    }
  }

 private:
  float first_moment_rate_, second_moment_rate_, epsilon_, weight_decay_;
};

// Elements a block of `SquaredNormBfloat16` sums before the blocks are summed in order.
constexpr int64_t kNormBlock = 1 << 14;

class SquaredNormBfloat16Op : public OpKernel {
 public:
  explicit SquaredNormBfloat16Op(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& tensor = context->input(0);
    const int64_t size = tensor.NumElements();
    const uint16_t* values =
        reinterpret_cast<const uint16_t*>(tensor.flat<::tensorflow::bfloat16>().data());
    const int64_t blocks = (size + kNormBlock - 1) / kNormBlock;
    std::vector<float> partial(blocks, 0.0f);
    const auto* threads = context->device()->tensorflow_cpu_worker_threads();
    // About 2 cycles an element: a load, a widening and a multiply-add.
    ::tensorflow::Shard(threads->num_threads, threads->workers, blocks, 2 * kNormBlock,
                        [&](int64_t begin, int64_t end) {
                          for (int64_t block = begin; block < end; ++block) {
                            const uint16_t* __restrict first = values + block * kNormBlock;
                            const int64_t count = std::min(kNormBlock, size - block * kNormBlock);
                            float total = 0.0f;
#pragma omp simd reduction(+ : total)
                            for (int64_t i = 0; i < count; ++i) {
                              const float value = FromBfloat16(first[i]);
                              total += value * value;
                            }
                            partial[block] = total;
                          }
                        });
    double total = 0.0;
    for (const float block_total : partial) total += block_total;
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, {}, &output));
    output->scalar<float>()() = static_cast<float>(total);
  }
};

REGISTER_KERNEL_BUILDER(Name("AdamWeightDecayBfloat16Update").Device(::tensorflow::DEVICE_CPU),
                        AdamWeightDecayBfloat16UpdateOp);
REGISTER_KERNEL_BUILDER(Name("SquaredNormBfloat16").Device(::tensorflow::DEVICE_CPU),
                        SquaredNormBfloat16Op);

}  // namespace
}  // namespace official_bert
