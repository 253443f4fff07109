#include "emit_flags.h"

#include "numeric_flags.h"
#include "strata/codegen/emit_knobs.h"

namespace strata::cli {

void add_emit_flags(CLI::App& app, EmitFlags& f) {
  app.add_option("--stages", f.stages, "pipeline stages per input tile (0: auto)")
      ->transform(integer_in(0, 64));
  app.add_option("--groups", f.groups,
                 "loop groups: split each for-loop over this many warp groups (0: auto, 1: off)")
      ->transform(integer_in(0, 64));
  app.add_option("--threads", f.threads, "threads per block (0: auto)")
      ->transform(integer_in(0, 1024));
  app.add_flag("--no-tensor-cores", f.no_tensor_cores, "use the SIMT matmul path everywhere");
  app.add_flag("--f32-intermediates", f.f32_intermediates,
               "store tensors passed between kernels in f32");
  app.add_flag("--no-chain", f.no_chain,
               "keep chained matmul results in shared memory (no FlashAttention-style chain)");
  app.add_flag("--no-fold", f.no_fold, "never fold rms_norm into a matmul as a scale");
  app.add_flag("--no-register-accums", f.no_register_accums,
               "keep non-matmul accumulators in shared memory");
  app.add_flag("--no-rowwise", f.no_rowwise, "no register-only rowwise kernels");
  app.add_flag("--no-library-matmul", f.no_library_matmul,
               "predefined matmuls as generated kernels, not cuBLAS calls (knob blas=0)");
  app.add_option("--knobs", f.knobs,
                 "emitter knobs as name=value[,name=value...] (booleans 0/1, a k suffix "
                 "multiplies by 1024), applied after the flags above:\n" +
                     emit_knobs_help());
}

Status apply_emit_flags(const EmitFlags& f, EmitOptions& o) {
  if (f.stages < 0 || f.threads < 0 || f.groups < -1)
    return make_error("--stages, --groups and --threads take non-negative values");
  if (f.stages > 0) o.plan.forced_stages = f.stages;
  if (f.groups >= 0) o.plan.loop_groups = f.groups;
  if (f.threads > 0) o.plan.threads = f.threads;
  if (f.no_tensor_cores) o.plan.tensor_cores = false;
  if (f.f32_intermediates) o.f32_intermediates = true;
  if (f.no_chain) o.plan.chain_matmuls = false;
  if (f.no_fold) o.plan.fold_norms = false;
  if (f.no_register_accums) o.plan.register_accums = false;
  if (f.no_rowwise) o.plan.rowwise = false;
  if (f.no_library_matmul) o.library_matmul = false;
  return apply_emit_knobs(f.knobs, o);
}

}  // namespace strata::cli
