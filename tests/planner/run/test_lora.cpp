// LoRA's adapters (planner/run/lora.hpp; Hu et al. 2021): each adapted linear W (out x in) gains lora_A (r x in)
// and lora_B (out x r), r (in + out) parameters, in the order peft creates the modules; and QLoRA's NF4 storage
// (Dettmers et al. 2023, Sec. 3). The counts are the modules' shapes added by hand; the peft figures quoted are
// what get_peft_model's print_trainable_parameters reports for the same models and targets.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "planner/run/lora.hpp"
#include "planner/run/run_config.hpp"

using namespace trainplan;

namespace {

// Llama-3-8B's shape: h 4096, 32 query heads of 128, 8 key/value heads, SwiGLU 14336, 32 layers.
model_spec llama3_8b() {
  model_spec m;
  m.family = model_family::llama;
  m.layers = 32, m.hidden = 4096, m.heads = 32, m.kv_heads = 8, m.head_dim = 128, m.ffn = 14336, m.vocab = 128256;
  return m;
}

// GPT-2 124M: h 768, 12 heads, MLP 3072, 12 layers, q, k and v fused in c_attn.
model_spec gpt2() {
  model_spec m;
  m.family = model_family::gpt;
  m.layers = 12, m.hidden = 768, m.heads = m.kv_heads = 12, m.head_dim = 64, m.ffn = 3072, m.vocab = 50257;
  m.max_positions = 1024;
  return m;
}

// A Phi-3-shaped Llama: qkv_proj and gate_up_proj fused (h 3072, 32 heads of 96, MLP 8192, 32 layers).
model_spec phi3() {
  model_spec m = llama3_8b();
  m.hidden = 3072, m.heads = m.kv_heads = 32, m.head_dim = 96, m.ffn = 8192, m.vocab = 32064;
  m.fused_projections = true;
  return m;
}

const stack_traits separate{};                                     // keeps_fused_projections = false
const stack_traits fused{.keeps_fused_projections = true};          // peft on the Hugging Face model
constexpr unsigned attention = lora_q | lora_k | lora_v | lora_o;
constexpr unsigned everything = attention | lora_mlp;

struct shape {
  std::uint64_t in, out;
  bool operator==(const lora_module& m) const { return m.in == in && m.out == out; }
};

void check_modules(const std::vector<lora_module>& got, const std::vector<shape>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("module " << i);
    CHECK(want[i] == got[i]);
  }
}

}  // namespace

TEST_CASE("lora: a Llama's modules are q, k, v, o, then gate, up and down, each as in x out", "[lora]") {
  // q (4096 -> 32 * 128), k and v (4096 -> 8 * 128), o (4096 -> 4096); gate and up (4096 -> 14336), down back.
  check_modules(lora_layer_modules(llama3_8b(), everything, separate),
                {{4096, 4096}, {4096, 1024}, {4096, 1024}, {4096, 4096}, {4096, 14336}, {4096, 14336}, {14336, 4096}});
  check_modules(lora_layer_modules(llama3_8b(), lora_v | lora_q, separate), {{4096, 4096}, {4096, 1024}});
  CHECK(lora_linears(llama3_8b(), everything, separate) == 7);
  CHECK(lora_layer_modules(llama3_8b(), 0, separate).empty());
}

TEST_CASE("lora: trainable counts are r (in + out) per module, every layer: peft's figures for Llama-3-8B", "[lora]") {
  // q, k, v, o: (8192 + 5120 + 5120 + 8192) = 26,624 per rank and layer; r 16, 32 layers: 13,631,488.
  CHECK(lora_params(llama3_8b(), 16, attention, separate) == 13'631'488);
  // And the MLP: 3 * 18,432 = 55,296 more, 81,920 per rank and layer: 41,943,040.
  CHECK(lora_params(llama3_8b(), 16, everything, separate) == 41'943'040);
}

TEST_CASE("lora: GPT-2 adapts its fused c_attn once for any of q, k, v, and c_fc and c_proj for the MLP", "[lora]") {
  // c_attn: 768 -> 3 * 768. peft's classic GPT-2 example (r 8 on c_attn): 8 * 12 * (768 + 2304) = 294,912.
  check_modules(lora_layer_modules(gpt2(), lora_q | lora_v, separate), {{768, 2304}});
  CHECK(lora_params(gpt2(), 8, lora_q | lora_v, separate) == 294'912);
  CHECK(lora_params(gpt2(), 8, lora_k, separate) == 294'912);
  // Everything: c_attn, the attention's c_proj (768 -> 768), c_fc (768 -> 3072), the MLP's c_proj (3072 -> 768):
  // 3072 + 1536 + 3840 + 3840 = 12,288 per rank and layer; r 8: 1,179,648.
  check_modules(lora_layer_modules(gpt2(), everything, separate), {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}});
  CHECK(lora_params(gpt2(), 8, everything, separate) == 1'179'648);
  CHECK(lora_qkv_modules(gpt2(), everything, separate) == 1);
}

TEST_CASE("lora: Phi-3's fused projections are one module each where the stack keeps them, separate elsewhere", "[lora]") {
  // Fused: qkv_proj (3072 -> 3 * 3072), o_proj, gate_up_proj (3072 -> 2 * 8192), down_proj.
  check_modules(lora_layer_modules(phi3(), everything, fused), {{3072, 9216}, {3072, 3072}, {3072, 16384}, {8192, 3072}});
  CHECK(lora_qkv_modules(phi3(), everything, fused) == 1);
  // A stack that splits them adapts q, k, v, o, gate, up and down as a Llama's.
  check_modules(lora_layer_modules(phi3(), everything, separate),
                {{3072, 3072}, {3072, 3072}, {3072, 3072}, {3072, 3072}, {3072, 8192}, {3072, 8192}, {8192, 3072}});
  CHECK(lora_qkv_modules(phi3(), everything, separate) == 3);
  // The same weights either way, but the adapters differ: fused, r (3072 + 9216) for q, k, v against 3 r (3072 + 3072).
  CHECK(lora_params(phi3(), 1, lora_q, fused) == 32 * (3072 + 9216));
  CHECK(lora_params(phi3(), 1, lora_q, separate) == 32 * (3072 + 3072));
}

TEST_CASE("lora: one layer's adapter tensors are each module's lora_A then lora_B, as PyTorch holds them", "[lora]") {
  // q (4096 -> 4096) and o (4096 -> 4096) at r 8: A (8 x 4096), B (4096 x 8) each.
  const std::vector<std::uint64_t> qo = lora_layer_tensors(llama3_8b(), 8, lora_q | lora_o, separate);
  CHECK(qo == std::vector<std::uint64_t>{8 * 4096, 4096 * 8, 8 * 4096, 4096 * 8});
  // k (4096 -> 1024): A is r x in = 8 x 4096, B out x r = 1024 x 8.
  CHECK(lora_layer_tensors(llama3_8b(), 8, lora_k, separate) == std::vector<std::uint64_t>{8 * 4096, 1024 * 8});
  // Of q, k, v, o (3 q/k/v modules), tensors 0, 2 and 4 are the q/k/v lora_A; 1 is a lora_B, 6 o's lora_A.
  const unsigned qkv = lora_qkv_modules(llama3_8b(), attention, separate);
  CHECK(qkv == 3);
  CHECK(lora_is_qkv_a(0, qkv));
  CHECK_FALSE(lora_is_qkv_a(1, qkv));
  CHECK(lora_is_qkv_a(4, qkv));
  CHECK_FALSE(lora_is_qkv_a(6, qkv));
  CHECK(lora_qkv_modules(llama3_8b(), lora_o | lora_mlp, separate) == 0);
}

TEST_CASE("lora: QLoRA's NF4 is 4 bits a weight, a byte per 64-weight block, 4 bytes per 256 blocks", "[lora][qlora]") {
  // QLoRA Sec. 3: 4 + 8/64 + 32/(64 * 256) = 4.127 bits a weight. 16,384 weights (256 blocks of 64):
  // 8,192 + 256 + 4 = 8,452 bytes, 4.126953125 bits each, exactly.
  CHECK(nf4_bytes(16384) == 8452);
  CHECK(nf4_bytes(16384) * 8.0 / 16384 == Approx(4 + 8.0 / 64 + 32.0 / (64 * 256)).epsilon(1e-12));
  // Partial blocks round up: 1 weight is half a byte (1), one block (1), one group of blocks (4).
  CHECK(nf4_bytes(1) == 6);
  CHECK(nf4_bytes(64) == 32 + 1 + 4);
  CHECK(nf4_bytes(65) == 33 + 2 + 4);
  // 257 blocks need a second fp32 constant.
  CHECK(nf4_bytes(257 * 64) == 257 * 32 + 257 + 8);
}
