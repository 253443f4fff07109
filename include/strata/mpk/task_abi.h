// The binary layout of a compiled decode step as the persistent megakernel reads it
// (docs/megakernel.md, "The task tables"). Plain C, included by the C++ task-graph compiler and
// by the CUDA runtime (runtime/mpk/), so both agree on every number here.
//
// A compiled step is four tables:
//   ops    int64[num_ops][MPK_OP_FIELDS]     what each kernel-level op computes, where its
//                                            operands live (workspace byte offsets, buffer ids)
//   tasks  int32[num_tasks][MPK_TASK_FIELDS] one block's share of an op (its tile or head),
//                                            the events it waits on and the events it triggers
//   events int32[num_events]                 the number of triggers that make the event fire
//   waits, triggers int32[]                  event ids, ranges of them named by the tasks
// plus the schedule (the order, static per-worker lists). Workspace offsets are in bytes; a
// field that is not used by a kind holds -1.
#ifndef STRATA_MPK_TASK_ABI_H
#define STRATA_MPK_TASK_ABI_H

#define STRATA_MPK_ABI_VERSION 5

/* Task kinds. The operand fields of each kind (B: batch, D: head dim, Hq/Hkv: heads):
 *  MPK_EMBED          W0 embedding f16[V,H]; OUT0 x f16[B,H]; task I0 = batch row b; reads the
 *                     step's input tokens.
 *  MPK_NORM_MATMUL    IN0 x f16[B,K]; W0 RMSNorm gain f16[K]; W1 weight f16[N,K];
 *                     OUT0 y f16[B,N] = rmsnorm(x)·gain @ W1ᵀ; task I0 = tile of TILE columns.
 *  MPK_ATTN_CHUNK     IN0 qkv f16[B,(Hq+2Hkv)·D]; W0 q-norm gain f16[D] or -1; W1 k-norm gain or
 *                     -1; W2 rotary inverse frequencies f32[D/2]; W3 k cache, W4 v cache
 *                     f16[L,B,Hkv,max_kv,D]; OUT0 partial o f32[B,Hq,N,D]; OUT1 partial (max,
 *                     sum) f32[B,Hq,N,2]; N = chunks per head; task I0 = b, I1 = kv head,
 *                     I2 = chunk. The task's q heads are normed (q-norm) and rotated by `pos`
 *                     from qkv, each value rounded to f16. Chunk c scores the cached positions
 *                     [c·len, (c+1)·len) ∩ [0, pos), len = ⌈pos/N⌉; chunk 0 also the step's own
 *                     position `pos`, whose k (normed, rotated, rounded to f16) and v it takes
 *                     from qkv.
 *  MPK_ATTN_COMBINE   IN0 partial o; IN1 partial (max, sum); IN2 qkv; W1 k-norm gain or -1;
 *                     W2 rotary inverse frequencies; W3/W4 caches; OUT0 attn f16[B,Hq·D];
 *                     N = chunks; task I0 = b, I1 = kv head. Appends the step's k, v (as chunk
 *                     0 computed them) at position `pos` of its caches' row.
 *  MPK_MATMUL_RESIDUAL IN0 a f16[B,K]; IN1 residual f16[B,N]; W1 weight f16[N,K];
 *                     OUT0 y f16[B,N] = residual + a @ W1ᵀ; task I0 = tile.
 *  MPK_NORM_GATED     IN0 x f16[B,K]; W0 gain; W1 gate f16[N,K]; W2 up f16[N,K];
 *                     OUT0 h f16[B,N] = silu(n @ W1ᵀ) · (n @ W2ᵀ), n = rmsnorm(x)·gain; task tile.
 *  MPK_NORM_LMHEAD    IN0 x; W0 gain; W1 lm head f16[N=V,K]; OUT0 logits f32[B,N] (each rounded
 *                     to f16 precision); OUT1 per-tile argmax {f32 value, i32 index}[NTILES,B];
 *                     task I0 = tile.
 *  MPK_ARGMAX         IN0 per-tile argmax; NTILES; writes the step's output tokens (first index
 *                     of the maximum); one task.
 *  MPK_GENERATED      one kernel of a μGraph from strata's code generator (docs/megakernel.md,
 *                     "Generated tasks"): FUNC = the id of its task entry in the generated
 *                     header's dispatch; ARG0.. = its operands in the entry's parameter order
 *                     (inputs, then outputs), each encoded by MPK_ARG_*; task I0, I1, I2 = the
 *                     block index (bx, by, bz) of the kernel's grid.
 */
enum {
  MPK_EMBED = 0,
  MPK_NORM_MATMUL = 1,
  MPK_ATTN_CHUNK = 2,
  MPK_ATTN_COMBINE = 3,
  MPK_MATMUL_RESIDUAL = 4,
  MPK_NORM_GATED = 5,
  MPK_NORM_LMHEAD = 6,
  MPK_ARGMAX = 7,
  MPK_GENERATED = 8,
  MPK_NUM_KINDS = 9
};

/* Fields of one op record (int64). */
enum {
  MPK_OP_KIND = 0,
  MPK_OP_LAYER = 1,
  MPK_OP_IN0 = 2,
  MPK_OP_IN1 = 3,
  MPK_OP_OUT0 = 4,
  MPK_OP_OUT1 = 5,
  MPK_OP_W0 = 6,
  MPK_OP_W1 = 7,
  MPK_OP_W2 = 8,
  MPK_OP_W3 = 9,
  MPK_OP_W4 = 10,
  MPK_OP_K = 11,
  MPK_OP_N = 12,
  MPK_OP_TILE = 13,
  MPK_OP_NTILES = 14,
  MPK_OP_FUNC = 15,
  MPK_OP_ARG0 = 16,
  MPK_OP_MAX_ARGS = 8,
  MPK_OP_IN2 = 24,
  MPK_OP_FIELDS = 25
};

/* An operand of MPK_GENERATED: a workspace byte offset (>= 0), a buffer id b encoded as
 * -(b + 2) (<= -2), or MPK_ARG_NONE. */
#define MPK_ARG_NONE (-1)
#define MPK_ARG_BUFFER(b) (-(b)-2)
#define MPK_ARG_IS_BUFFER(v) ((v) <= -2)
#define MPK_ARG_BUFFER_ID(v) (-(v)-2)

/* Fields of one task record (int32). WAIT_*: a range of `waits`; TRIG_*: a range of `triggers`. */
enum {
  MPK_TASK_OP = 0,
  MPK_TASK_I0 = 1,
  MPK_TASK_I1 = 2,
  MPK_TASK_I2 = 3,
  MPK_TASK_WAIT_BEGIN = 4,
  MPK_TASK_WAIT_COUNT = 5,
  MPK_TASK_TRIG_BEGIN = 6,
  MPK_TASK_TRIG_COUNT = 7,
  MPK_TASK_FIELDS = 8
};

#endif /* STRATA_MPK_TASK_ABI_H */
