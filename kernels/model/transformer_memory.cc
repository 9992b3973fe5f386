// The transformer's construction: the parameter layout, every device buffer (in the order and
// precision core/memory_estimate.h counts them), initialisation, and the precision factory.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/model/transformer.h"
#include "kernels/model/transformer_state.h"

namespace parity::kernels {
namespace {

// Every array is its own zeroed device buffer of at least one element; the first failure sticks
// and later requests return null, so a run out of memory reports the first allocation that failed.
class BufferList {
 public:
  BufferList(Device& device, std::vector<std::unique_ptr<Buffer>>& owned)
      : device_(device), owned_(owned) {}
  template <typename U>
  U* Get(int64_t n) {
    if (!status_.ok()) return nullptr;
    auto buffer = device_.Allocate(static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(U));
    if (!buffer.ok()) {
      status_ = buffer.status();
      return nullptr;
    }
    U* p = (*buffer)->template as<U>();
    owned_.push_back(*std::move(buffer));
    return p;
  }
  const absl::Status& status() const { return status_; }

 private:
  Device& device_;
  std::vector<std::unique_ptr<Buffer>>& owned_;
  absl::Status status_;
};

// One layer's saved activations, in the precisions its Layer struct declares (T for x_mid,
// statistics and the router, A for the rest).
template <typename Layer>
void AllocateLayer(BufferList& a, Layer& y, const ModelConfig& m, int64_t Tn, int64_t max_batch) {
  using T = std::remove_pointer_t<decltype(y.x_mid)>;
  using A = std::remove_pointer_t<decltype(y.h1)>;
  const int64_t D = m.d_model, S = m.seq_len;
  const int64_t qkv_width = (m.n_heads + 2 * m.n_kv_heads) * m.head_dim();
  y.h1 = a.Get<A>(Tn * D);
  y.rstd1 = a.Get<T>(Tn);
  y.qkv = a.Get<A>(Tn * qkv_width);
  y.att_lse = a.Get<T>(max_batch * m.n_heads * S);
  y.att = a.Get<A>(Tn * D);
  y.x_mid = a.Get<T>(Tn * D);
  y.h2 = a.Get<A>(Tn * D);
  y.rstd2 = a.Get<T>(Tn);
  const int64_t f = y.moe ? m.SharedDim() : m.d_ffn;
  if (f > 0) {
    y.ab = a.Get<A>(Tn * 2 * f);
    y.g = a.Get<A>(Tn * f);
  }
  if (!y.moe) return;
  const int64_t E = m.n_experts, K = m.top_k, P = Tn * K, De = m.d_expert;
  y.rlogits = a.Get<T>(Tn * E);
  y.rprobs = a.Get<T>(Tn * E);
  y.rlse = a.Get<T>(Tn);
  y.gate = a.Get<T>(Tn * K);
  y.xs = a.Get<A>(P * D);
  y.ab_e = a.Get<A>(P * 2 * De);
  y.g_e = a.Get<A>(P * De);
  y.ys = a.Get<A>(P * D);
  y.expert = a.Get<int32_t>(Tn * K);
  y.slot_of = a.Get<int32_t>(Tn * K);
  y.token_of = a.Get<int32_t>(P);
  y.load = a.Get<int64_t>(E);
  y.plan_offsets = a.Get<int64_t>(E + 1);
  y.bias = a.Get<float>(E);
}

// Under activation checkpointing a layer reuses the activation buffers of the first layer of its
// kind (recomputed before its backward); it keeps its own parameter offsets.
template <typename Layer>
void ShareActivations(const Layer& first, Layer& y) {
  Layer shared = first;
  shared.attn_norm = y.attn_norm, shared.w_qkv = y.w_qkv, shared.w_o = y.w_o;
  shared.ffn_norm = y.ffn_norm, shared.w13 = y.w13, shared.w2 = y.w2;
  shared.router = y.router, shared.e_w13 = y.e_w13, shared.e_w2 = y.e_w2;
  shared.s_w13 = y.s_w13, shared.s_w2 = y.s_w2;
  y = std::move(shared);
}

}  // namespace

template <typename T, typename A>
Transformer<T, A>::Transformer(const ModelConfig& config, Device& device, const Ops& ops,
                               int64_t max_batch, bool recompute)
    : config_(config),
      device_(device),
      ops_(ops),
      max_batch_(max_batch),
      recompute_(recompute),
      g_(std::make_unique<Globals>()) {}

template <typename T, typename A>
Transformer<T, A>::~Transformer() = default;

template <typename T, typename A>
absl::StatusOr<std::unique_ptr<Transformer<T, A>>> Transformer<T, A>::Create(
    const ModelConfig& config, Device& device, int64_t max_batch, bool recompute) {
  const std::string name(device.Name());
  const Ops* ops = nullptr;
  if constexpr (std::is_same_v<T, A>) {
    ops = OpsFor<T>(device);
    if (ops == nullptr) {
      return absl::UnimplementedError(
          absl::StrCat(name, ": no kernels for ", sizeof(T) * 8, "-bit floats"));
    }
    for (int k = 0; k < static_cast<int>(OpKind::kCount); ++k) {
      if (!ops->Supports(static_cast<OpKind>(k))) {
        return absl::UnimplementedError(
            absl::StrCat(name, ": op ", OpName(static_cast<OpKind>(k)), " missing"));
      }
    }
  } else {
    ops = device.OpsBf16();
    if (ops == nullptr || !ops->Complete()) {
      return absl::UnimplementedError(absl::StrCat(name, ": no bf16 kernels"));
    }
  }
  if (max_batch <= 0) return absl::InvalidArgumentError("max_batch must be positive");
  std::unique_ptr<Transformer> model(new Transformer(config, device, *ops, max_batch, recompute));
  absl::Status status = model->Allocate();
  if (!status.ok()) return status;
  return model;
}

template <typename T, typename A>
absl::Status Transformer<T, A>::Allocate() {
  const ModelConfig& m = config_;
  const int64_t D = m.d_model, L = m.n_layers, Dh = m.head_dim();
  const int64_t qkv_width = (m.n_heads + 2 * m.n_kv_heads) * Dh;
  auto add = [&](const std::string& name, int64_t size, WeightDecay decay) {
    tensors_.push_back({name, num_params_, size, decay});
    num_params_ += size;
    return tensors_.back().offset;
  };
  g_->wte = add("wte", m.vocab_size * D, WeightDecay::kApply);
  int64_t max_ffn = 0;
  for (int64_t l = 0; l < L; ++l) {
    auto layer = std::make_unique<Layer>();
    const std::string p = absl::StrCat("layer", l, ".");
    layer->moe = m.IsMoeLayer(l);
    layer->attn_norm = add(p + "attn_norm", D, WeightDecay::kSkip);
    layer->w_qkv = add(p + "w_qkv", qkv_width * D, WeightDecay::kApply);
    layer->w_o = add(p + "w_o", D * D, WeightDecay::kApply);
    layer->ffn_norm = add(p + "ffn_norm", D, WeightDecay::kSkip);
    if (!layer->moe) {
      layer->w13 = add(p + "w13", 2 * m.d_ffn * D, WeightDecay::kApply);
      layer->w2 = add(p + "w2", D * m.d_ffn, WeightDecay::kApply);
      max_ffn = std::max(max_ffn, m.d_ffn);
    } else {
      const int64_t E = m.n_experts, De = m.d_expert, Dse = m.SharedDim();
      layer->router = add(p + "router", E * D, WeightDecay::kApply);
      layer->e_w13 = add(p + "experts.w13", E * 2 * De * D, WeightDecay::kApply);
      layer->e_w2 = add(p + "experts.w2", E * D * De, WeightDecay::kApply);
      if (Dse > 0) {
        layer->s_w13 = add(p + "shared.w13", 2 * Dse * D, WeightDecay::kApply);
        layer->s_w2 = add(p + "shared.w2", D * Dse, WeightDecay::kApply);
        max_ffn = std::max(max_ffn, Dse);
      }
      layer->stats.load.assign(E, 0);
      layer->offsets.assign(E + 1, 0);
      moe_layers_.push_back(l);
    }
    layers_.push_back(std::move(layer));
  }
  g_->final_norm = add("final_norm", D, WeightDecay::kSkip);
  g_->head =
      m.head == HeadTying::kTied ? g_->wte : add("head", m.vocab_size * D, WeightDecay::kApply);
  return AllocateActivations(max_ffn);
}

// Parameters, gradients, the weight copy, then the activations and scratch of max_batch sequences.
template <typename T, typename A>
absl::Status Transformer<T, A>::AllocateActivations(int64_t max_ffn) {
  const ModelConfig& m = config_;
  const int64_t D = m.d_model, L = m.n_layers;
  const int64_t qkv_width = (m.n_heads + 2 * m.n_kv_heads) * m.head_dim();
  BufferList a(device_, buffers_);
  params_ = a.Get<T>(num_params_);
  grads_ = a.Get<T>(num_params_);
  if constexpr (std::is_same_v<T, A>) {
    weights_ = params_;
  } else {
    weights_ = a.Get<A>(num_params_);
  }
  const int64_t Tn = max_batch_ * m.seq_len;
  g_->tokens = a.Get<int32_t>(Tn);
  g_->targets = a.Get<int32_t>(Tn);
  g_->resid = a.Get<T>((L + 1) * Tn * D);
  int64_t max_e = 1, max_p = 1, max_de = 1;
  const Layer* first_of_kind[2] = {nullptr, nullptr};  // [dense, MoE], under recompute
  for (int64_t l = 0; l < L && a.status().ok(); ++l) {
    Layer& y = *layers_[l];
    const Layer*& first = first_of_kind[y.moe ? 1 : 0];
    if (recompute_ && first != nullptr) {
      ShareActivations(*first, y);
      if (y.moe) y.bias = a.Get<float>(m.n_experts);  // state, not an activation: never shared
    } else {
      AllocateLayer(a, y, m, Tn, max_batch_);
      if (y.moe) {
        const int64_t E = m.n_experts, P = Tn * m.top_k, De = m.d_expert;
        max_e = std::max(max_e, E), max_p = std::max(max_p, P), max_de = std::max(max_de, De);
      }
      first = &y;
    }
    y.x_in = g_->resid + l * Tn * D;
    y.x_out = g_->resid + (l + 1) * Tn * D;
  }
  g_->hf = a.Get<A>(Tn * D);
  g_->rstdf = a.Get<T>(Tn);
  g_->logits = a.Get<T>(Tn * m.vocab_size);
  g_->loss = a.Get<T>(Tn);
  const int64_t n_moe = static_cast<int64_t>(moe_layers_.size());
  g_->route_losses = a.Get<double>(2 * n_moe);
  for (int64_t i = 0; i < n_moe && a.status().ok(); ++i) {
    layers_[moe_layers_[i]]->losses = g_->route_losses + 2 * i;
  }
  g_->host_route_losses.resize(2 * n_moe);
  const int64_t ffn = std::max<int64_t>(max_ffn, 1);
  g_->dresid = a.Get<T>(Tn * D);
  g_->dh = a.Get<A>(Tn * D);
  g_->dhf = a.Get<A>(Tn * D);
  g_->dqkv = a.Get<A>(Tn * qkv_width);
  g_->datt = a.Get<A>(Tn * D);
  g_->dab = a.Get<A>(Tn * 2 * ffn);
  g_->dg = a.Get<A>(Tn * ffn);
  g_->dlogits = a.Get<T>(Tn * m.vocab_size);
  if (!moe_layers_.empty()) {
    g_->drlogits = a.Get<T>(Tn * max_e);
    g_->dgate = a.Get<T>(Tn * m.top_k);
    g_->dys = a.Get<A>(max_p * D);
    g_->dg_e = a.Get<A>(max_p * max_de);
    g_->dab_e = a.Get<A>(max_p * 2 * max_de);
    g_->dxs = a.Get<A>(max_p * D);
  }
  g_->host_loss.resize(Tn);
  return a.status();
}

template <typename T, typename A>
void Transformer<T, A>::InitParams(Rng& rng) {
  // The serial definition: tensor by tensor, element by element, one rng.Normal() (two counter
  // values) per non-norm element. Rng is counter-based, so each element's value depends only on
  // its counter: the tensors are laid out first (start counter, scale), then filled by host
  // threads in chunks — the same bits as the serial loop, in a fraction of its time (a 2B model
  // took ≈ 80 s on one thread).
  struct Fill {
    int64_t offset, size;
    uint64_t counter;  // rng.counter at the tensor's first element
    double std;
    bool ones;  // a norm weight: ones, no draws
  };
  const double out_scale = 1.0 / std::sqrt(2.0 * config_.n_layers);
  std::vector<Fill> fills;
  uint64_t counter = rng.counter;
  for (const ParamTensor& t : tensors_) {
    const bool is_norm = t.decay == WeightDecay::kSkip;
    const bool residual_out = t.name.ends_with("w_o") || t.name.ends_with("w2");
    fills.push_back(
        {t.offset, t.size, counter, config_.init_std * (residual_out ? out_scale : 1.0), is_norm});
    if (!is_norm) counter += 2 * static_cast<uint64_t>(t.size);
  }
  std::vector<T> host(num_params_);
  constexpr int64_t kChunk = 1 << 20;             // elements a task
  std::vector<std::pair<size_t, int64_t>> tasks;  // (fill, first element)
  for (size_t f = 0; f < fills.size(); ++f) {
    for (int64_t i = 0; i < fills[f].size; i += kChunk) tasks.emplace_back(f, i);
  }
  std::atomic<size_t> next{0};
  const auto worker = [&] {
    for (size_t k; (k = next.fetch_add(1)) < tasks.size();) {
      const Fill& f = fills[tasks[k].first];
      const int64_t begin = tasks[k].second, end = std::min(f.size, begin + kChunk);
      Rng r{.seed = rng.seed, .counter = f.counter + 2 * static_cast<uint64_t>(begin)};
      for (int64_t i = begin; i < end; ++i) {
        host[f.offset + i] = f.ones ? T(1) : static_cast<T>(f.std * r.Normal());
      }
    }
  };
  const int64_t threads = std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()),
                                            static_cast<int64_t>(tasks.size()));
  std::vector<std::thread> pool;
  for (int64_t i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  rng.counter = counter;
  device_.FromHost(params_, host.data(), host.size() * sizeof(T));
  weights_stale_ = true;
}

template <typename T, typename A>
void Transformer<T, A>::RefreshWeights() {
  if constexpr (!std::is_same_v<T, A>) {
    if (weights_stale_) ops_.cast_to_bf16(device_.Context(), num_params_, weights_, params_);
  }
  weights_stale_ = false;
}

template <typename T, typename A>
void Transformer<T, A>::ZeroGrads() {
  device_.Zero(grads_, static_cast<size_t>(num_params_) * sizeof(T));
}

template <typename T, typename A>
const RoutingStats& Transformer<T, A>::Routing(int64_t i) const {
  return layers_[moe_layers_[i]]->stats;
}
template <typename T, typename A>
float* Transformer<T, A>::BalanceBias(int64_t i) {
  return layers_[moe_layers_[i]]->bias;
}

template <typename T, typename A>
size_t Transformer<T, A>::AllocatedBytes() const {
  size_t bytes = 0;
  for (const auto& b : buffers_) bytes += b->bytes();
  return bytes;
}

absl::StatusOr<std::unique_ptr<Model<float>>> CreateModel(const ModelConfig& config,
                                                          Precision precision, Device& device,
                                                          int64_t max_batch, bool recompute) {
  switch (precision) {
    case Precision::kFp32: {
      auto model = Transformer<float>::Create(config, device, max_batch, recompute);
      if (!model.ok()) return model.status();
      return std::unique_ptr<Model<float>>(*std::move(model));
    }
    case Precision::kBf16: {
      auto model = Transformer<float, Bf16>::Create(config, device, max_batch, recompute);
      if (!model.ok()) return model.status();
      return std::unique_ptr<Model<float>>(*std::move(model));
    }
    case Precision::kUnspecified:
      break;
  }
  return absl::InvalidArgumentError("CreateModel: the precision must be resolved (fp32 or bf16)");
}

template class Transformer<float>;
template class Transformer<double>;
template class Transformer<float, Bf16>;

}  // namespace parity::kernels
