#pragma once
// The hf profile's rows: the buffers each operation of a decoder layer makes, one table per operation, each
// row a name, shape rule, dtype role, keep class and the conditions it applies under
// (planner/profiles/hf/activations_hf_row_rules.hpp). The layer's operations in program order, each with its
// rows and its kernels, are the op lists of planner/profiles/hf/hf_layer_ops.cpp, the one file that includes
// this: walking a family's list gives the layer's buffers in the order the forward creates them (a backward
// working buffer beside what its backward reads), the order in which the allocator replay
// (planner/allocator/allocator_schedule.cpp) allocates and frees within an event. A table may serve both
// families (GPT-2's and the Llama family's rows are told apart by their conditions).
//
// Sources: the saved-tensor inventories (op, saved name, dtype, shape), and the modeling code they come from:
// transformers' GPT2Block/GPT2Attention/NewGELUActivation and LlamaDecoderLayer/LlamaRMSNorm/LlamaMLP/
// apply_rotary_pos_emb; PyTorch's autocast op lists (fp32: layer_norm, pow, softmax, log_softmax),
// derivatives.yaml (which inputs each backward saves) and, for the math path, _scaled_dot_product_attention_math
// (aten/src/ATen/native/transformers/attention.cpp).
//
// The tables, by part of the layer (each file one part; hf_layer_ops.cpp names the tables in program order):
#include "planner/profiles/hf/activations_hf_rows_attention.hpp"
#include "planner/profiles/hf/activations_hf_rows_mlp.hpp"
#include "planner/profiles/hf/activations_hf_rows_norms.hpp"
#include "planner/profiles/hf/activations_hf_rows_projections.hpp"
#include "planner/profiles/hf/activations_hf_rows_working.hpp"
