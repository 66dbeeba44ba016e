// Writing a sweep (sweep_output.hpp): the columns, one row a configuration as CSV (RFC 4180 quoting) or JSON
// lines, formatted on the worker threads and written in order.
#include "cli/sweep_output.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <stdexcept>

#include "cli/output_file.hpp"
#include "cli/progress.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/util/input_error.hpp"
#include "planner/evaluate/plan.hpp"
#include "planner/search/sweep_runner.hpp"

namespace trainplan::cli {
namespace {

// One part's rows kept aside until they are due (run_sweep): in a file without a name (tmpfile: unlinked as
// it is made, so an interrupted sweep leaves nothing behind), or in memory where no such file can be made.
class part_spool {
 public:
  part_spool() = default;
  part_spool(const part_spool&) = delete;
  part_spool& operator=(const part_spool&) = delete;
  ~part_spool() {
    if (file_) std::fclose(file_);
  }
  void keep(const fmt::memory_buffer& rows) {
    if (!tried_) file_ = std::tmpfile(), tried_ = true;
    if (file_ && std::fwrite(rows.data(), 1, rows.size(), file_) == rows.size()) return;
    if (file_) throw_write_error(file_, errno, "a temporary file of the sweep's rows");
    memory_.append(rows.data(), rows.data() + rows.size());
  }
  // Hands what was kept to write_bytes(data, size), in order, and forgets it.
  template <class write_fn>
  void write_out(write_fn& write_bytes) {
    if (file_) {
      std::rewind(file_);
      std::vector<char> chunk(1 << 20);
      for (std::size_t n; (n = std::fread(chunk.data(), 1, chunk.size(), file_)) > 0;) write_bytes(chunk.data(), n);
      if (std::ferror(file_)) throw_write_error(file_, errno, "a temporary file of the sweep's rows");
      std::fclose(file_);
      file_ = nullptr, tried_ = false;  // a fresh one for the next model
    }
    write_bytes(memory_.data(), memory_.size());
    memory_.clear();
  }

 private:
  std::FILE* file_ = nullptr;
  fmt::memory_buffer memory_;
  bool tried_ = false;
};

void json_string(fmt::memory_buffer& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
}

// One value per column, typed so both formats can write it.
struct cell {
  enum kind_t { text, integer, real, boolean, null } kind = null;
  std::string_view s;
  std::uint64_t u = 0;
  std::int64_t i = 0;
  bool is_signed = false;
  double d = 0;
  bool b = false;
};

cell t(std::string_view s) { cell c; c.kind = cell::text; c.s = s; return c; }
cell u(std::uint64_t v) { cell c; c.kind = cell::integer; c.u = v; return c; }
cell i(std::int64_t v) { cell c; c.kind = cell::integer; c.i = v; c.is_signed = true; return c; }
cell r(double v) { cell c; c.kind = cell::real; c.d = v; return c; }
cell b(bool v) { cell c; c.kind = cell::boolean; c.b = v; return c; }
cell none() { return {}; }

}  // namespace

const std::vector<std::string>& sweep_columns() {
  static const std::vector<std::string> columns = {
      "model", "family", "params", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab",
      "gpu", "memory_bytes",
      "seq", "micro_batch", "grad_accum", "global_batch", "tokens_per_step", "precision", "grad_dtype", "optimizer",
      "recompute", "attention", "dropout",
      // the stack and the layout the row predicts (single-valued in a sweep, so that each row says it)
      "framework", "optimizer_impl", "finetune", "gpus", "zero", "offload", "expandable_segments", "loss", "compile",
      "packing",
      "weights_bytes", "master_weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes",
      "activations_per_layer_bytes", "logits_bytes", "activation_grads_bytes", "overhead_bytes", "peak_bytes",
      "peak_phase", "fits", "headroom_bytes",
      "model_per_step", "hardware_per_step", "step_seconds", "tokens_per_second", "mfu", "hfu",
      "error"};
  return columns;
}

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

void append_row(fmt::memory_buffer& out, const sweep_result& res, sweep_format format) {
  const sweep_space::point& p = res.point;
  const model_spec& m = p.model->spec;
  const run_config& run = p.run;
  const bool ok = res.plan.has_value();
  std::string phase;
  cell cells[64];  // at least sweep_columns().size(): checked below
  std::size_t n = 0;
  cells[n++] = t(m.name);
  cells[n++] = t(family_name(m.family));
  cells[n++] = u(p.model->facts.counts.total);
  cells[n++] = u(m.layers);
  cells[n++] = u(m.hidden);
  cells[n++] = u(m.heads);
  cells[n++] = u(m.kv_heads);
  cells[n++] = u(m.ffn);
  cells[n++] = u(m.vocab);
  cells[n++] = t(p.gpu->spec.name);
  cells[n++] = u(p.gpu->spec.memory_bytes);
  cells[n++] = u(run.seq);
  cells[n++] = u(run.micro_batch);
  cells[n++] = ok || run.grad_accum ? u(run.grad_accum) : none();
  const bool sizes_known = ok;
  // Over every data-parallel GPU, as plan --json counts them.
  cells[n++] = sizes_known ? u(run.global_batch()) : none();
  cells[n++] = sizes_known ? u(run.seq * run.global_batch()) : none();
  cells[n++] = t(precision_name(run.precision));
  cells[n++] = ok ? t(dtype_name(res.plan->layout.optimizer_grad_dtype())) : t(grad_dtype_choice_name(run.grad_dtype));
  cells[n++] = t(optimizer_name(run.optimizer));
  cells[n++] = t(recompute_name(run.recompute));
  cells[n++] = t(attention_name(run.attention));
  cells[n++] = r(run.dropout);
  cells[n++] = t(profile_of(run).name);
  cells[n++] = t(optimizer_impl_name(run.optimizer_impl));
  cells[n++] = t(finetune_name(run.finetune));
  cells[n++] = u(run.gpus);
  cells[n++] = u(static_cast<std::uint64_t>(run.zero));
  cells[n++] = t(offload_name(run.offload));
  cells[n++] = b(run.expandable_segments);
  cells[n++] = t(loss_name(run.loss));
  cells[n++] = t(compile_scope_name(run.compile));
  cells[n++] = u(run.packing_doc_tokens);  // the documents' tokens in each packed row; 0: not packed
  if (ok) {
    const plan_result& pl = *res.plan;
    for (tensor_category c : {tensor_category::weights, tensor_category::master_weights, tensor_category::gradients,
                              tensor_category::optimizer, tensor_category::activations})
      cells[n++] = u(pl.category_bytes(c));
    cells[n++] = u(pl.inv.activations_per_layer_bytes);
    cells[n++] = u(pl.category_bytes(tensor_category::logits));
    cells[n++] = u(pl.category_bytes(tensor_category::activation_grads));
    cells[n++] = u(pl.overhead.total());
    cells[n++] = u(pl.peak_bytes);
    phase = phase_name(pl.timeline.peak);
    cells[n++] = t(phase);
    cells[n++] = b(pl.fits);
    cells[n++] = i(pl.headroom_bytes);
    cells[n++] = r(pl.flops.model_per_step);
    cells[n++] = r(pl.flops.hardware_per_step);
    cells[n++] = r(pl.time.step_seconds);
    cells[n++] = r(pl.time.tokens_per_second);
    cells[n++] = r(pl.time.mfu);
    cells[n++] = r(pl.time.hfu);
    cells[n++] = none();
  } else {
    while (n + 1 < sweep_columns().size()) cells[n++] = none();
    cells[n++] = t(res.error);
  }

  auto it = std::back_inserter(out);
  const std::vector<std::string>& names = sweep_columns();
  if (n != names.size()) throw std::logic_error("sweep row: cells and columns differ");  // a column added on one side only
  if (format == sweep_format::jsonl) out.push_back('{');
  for (std::size_t k = 0; k < n; ++k) {
    const cell& c = cells[k];
    if (format == sweep_format::csv) {
      if (k) out.push_back(',');
    } else {
      if (k) out.push_back(',');
      json_string(out, names[k]);
      out.push_back(':');
    }
    switch (c.kind) {
      case cell::text:
        if (format == sweep_format::csv) {
          if (c.s.find_first_of(",\"\r\n") == std::string_view::npos) out.append(c.s.data(), c.s.data() + c.s.size());
          else {
            const std::string q = csv_field(c.s);
            out.append(q.data(), q.data() + q.size());
          }
        } else {
          json_string(out, c.s);
        }
        break;
      case cell::integer:
        if (c.is_signed) fmt::format_to(it, "{}", c.i);
        else fmt::format_to(it, "{}", c.u);
        break;
      case cell::real: fmt::format_to(it, "{:.6g}", c.d); break;
      case cell::boolean: fmt::format_to(it, "{}", c.b ? "true" : "false"); break;
      case cell::null:
        if (format == sweep_format::jsonl) fmt::format_to(it, "null");
        break;
    }
  }
  if (format == sweep_format::jsonl) out.push_back('}');
  out.push_back('\n');
}

sweep_stats run_sweep(const sweep_space& space, sweep_format format, std::FILE* out, unsigned threads, bool show_progress,
                      bool replay, std::string_view destination) {
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t total = space.size();
  sweep_stats stats;
  auto write_bytes = [&](const char* data, std::size_t size) {
    // A reader that has gone (| head) ends the sweep quietly (output_closed); any other failure says why.
    if (std::fwrite(data, 1, size, out) != size) throw_write_error(out, errno, destination);
    stats.bytes_written += size;
  };
  auto write = [&](const fmt::memory_buffer& buf) { write_bytes(buf.data(), buf.size()); };
  if (format == sweep_format::csv) {
    fmt::memory_buffer header;
    for (std::size_t k = 0; k < sweep_columns().size(); ++k)
      fmt::format_to(std::back_inserter(header), "{}{}", k ? "," : "", sweep_columns()[k]);
    header.push_back('\n');
    write(header);
  }
  // Each unit's rows are formatted on its worker's thread, one buffer per part (GPU), and written in index
  // order: part 0's as they come, the other parts' kept aside until their model's last block
  // (planner/search/sweep_runner.hpp).
  const sweep_schedule schedule = schedule_sweep(space, threads, replay);
  std::vector<std::vector<fmt::memory_buffer>> text(schedule.slots);
  for (auto& slot : text) slot.resize(schedule.parts);
  std::vector<part_spool> kept(schedule.parts);
  progress bar("plan sweep", total, "configurations", show_progress);
  std::uint64_t done = 0;
  run_sweep_blocks(
      space, schedule, replay,
      [&](unsigned slot, std::uint64_t part, const sweep_result& res) { append_row(text[slot][part], res, format); },
      [&](unsigned slot, const sweep_block& block) {
        fmt::memory_buffer& rows = text[slot][block.part];
        if (block.part == 0) write(rows);
        else kept[block.part].keep(rows);
        rows.clear();
        stats.fitting += block.fitting;
        stats.invalid += block.invalid;
        bar.set(done += block.last - block.first);
        if (block.part + 1 == schedule.parts && block.part > 0 && block.last % schedule.part_points == 0)
          for (std::uint64_t p = 1; p < schedule.parts; ++p) kept[p].write_out(write_bytes);
      });
  bar.finish();
  stats.rows = total;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace trainplan::cli
