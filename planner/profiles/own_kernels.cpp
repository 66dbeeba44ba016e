// The loss and attention options a stack with kernels of its own refuses (own_kernels.hpp).
#include "planner/profiles/own_kernels.hpp"

#include <fmt/format.h>

#include "planner/util/input_error.hpp"

namespace trainplan {

void refuse_library_kernels(std::string_view stack, std::string_view loss_note, const run_config& run) {
  if (run.loss != loss_kind::standard)
    throw input_error(fmt::format("--loss {}: --framework {} computes its loss {}", loss_name(run.loss), stack, loss_note));
  if (run.attention == attention_kind::flash_attention_2)
    throw input_error(fmt::format("--attention flash_attention_2 (the flash-attn package as transformers calls it): "
                                  "--framework {} runs its own attention kernels (--attention flash or eager)",
                                  stack));
  // Packing is modelled where transformers' attention finds the documents (its position_ids): flash-attn's
  // varlen kernel or SDPA's block-diagonal mask.
  if (run.packing_doc_tokens > 0)
    throw input_error(fmt::format("--packing (documents packed into rows, attention within each, as transformers' "
                                  "modules run it): --framework {} runs its own attention kernels, not modelled packed",
                                  stack));
  if (compiles_layers(run))
    throw input_error(fmt::format("--compile (torch.compile of transformers' modules): --framework {} runs its own "
                                  "kernels", stack));
}

}  // namespace trainplan
