// Runs a compiled step op by op on the CPU emulator (runtime/strata_rt/emulate.h): each op's
// tasks are the blocks of one emulated launch of 256 threads, with the device task functions of
// mpk_tasks.cuh compiled as host C++. Used by tests/mpk_emulation_test.cc; built by the test with
//   c++ -std=c++20 -DSTRATA_RT_EMULATE -I include -I runtime -I <cuda>/include.
//
// Usage: emulate_ops IN OUT. IN (native-endian binary): int64 num_ops, num_tasks, num_buffers,
// workspace_bytes, smem_bytes, pos, and the model's batch, hidden, heads, kv_heads, head_dim,
// intermediate, vocab, max_kv, layers; float64 eps; the op records
// (int64 × MPK_OP_FIELDS each); the task records (int32 × MPK_TASK_FIELDS each); int32 tokens[batch]; per buffer an
// int64 byte count and the bytes. OUT: the workspace bytes, int32 tokens_out[batch], then the
// buffers' bytes again (the caches updated).
#include <algorithm>
#include <cstdio>
#include <vector>

#include "mpk/mpk_tasks.cuh"

namespace {

template <class T>
bool get(FILE* f, T* v, size_t n = 1) {
  return std::fread(v, sizeof(T), n, f) == n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  FILE* in = std::fopen(argv[1], "rb");
  if (!in) return 2;
  long long h[15];
  double eps;
  if (!get(in, h, 15) || !get(in, &eps)) return 2;
  const long long nops = h[0], ntasks = h[1], nbuf = h[2], wsb = h[3];
  // At least what the hand-written tasks need (their layout is the runtime's business).
  const long long max_k = std::max({h[7], h[11], h[8] * h[10]});
  const long long smem = std::max<long long>(
      h[4], strata_mpk::step_smem_bytes(static_cast<int>(h[6]), static_cast<int>(max_k),
                                        static_cast<int>(h[8]), static_cast<int>(h[9]),
                                        static_cast<int>(h[10])));
  std::vector<long long> ops(nops * MPK_OP_FIELDS);
  std::vector<int> tasks(ntasks * MPK_TASK_FIELDS), tokens(h[6]), out_tokens(h[6], -1);
  if (!get(in, ops.data(), ops.size()) || !get(in, tasks.data(), tasks.size()) ||
      !get(in, tokens.data(), tokens.size()))
    return 2;
  std::vector<std::vector<unsigned char>> bufs(nbuf);
  std::vector<void*> ptrs(nbuf);
  for (long long i = 0; i < nbuf; ++i) {
    long long n;
    if (!get(in, &n)) return 2;
    bufs[i].resize(n + 16);
    if (!get(in, bufs[i].data(), n)) return 2;
    bufs[i].resize(n);
    ptrs[i] = bufs[i].data();
  }
  std::fclose(in);
  std::vector<unsigned char> ws(wsb + 256, 0xff);  // unwritten f16/f32 reads are NaN
  strata_mpk::MpkParams p{};
  p.ops = ops.data();
  p.tasks = tasks.data();
  p.buffers = ptrs.data();
  p.workspace = reinterpret_cast<char*>(ws.data());
  p.tokens_in = tokens.data();
  p.tokens_out = out_tokens.data();
  p.num_tasks = static_cast<int>(ntasks);
  p.pos = static_cast<int>(h[5]);
  p.step = 1;
  p.batch = static_cast<int>(h[6]);
  p.hidden = static_cast<int>(h[7]);
  p.heads = static_cast<int>(h[8]);
  p.kv_heads = static_cast<int>(h[9]);
  p.head_dim = static_cast<int>(h[10]);
  p.intermediate = static_cast<int>(h[11]);
  p.vocab = static_cast<int>(h[12]);
  p.max_kv = static_cast<int>(h[13]);
  p.layers = static_cast<int>(h[14]);
  p.eps = static_cast<float>(eps);
  // Ops in order; an op's tasks are contiguous.
  int first = 0;
  for (long long o = 0; o < nops; ++o) {
    int n = 0;
    while (first + n < ntasks && tasks[(first + n) * MPK_TASK_FIELDS + MPK_TASK_OP] == o) ++n;
    const int f0 = first;
    strata_rt::emu::launch(dim3(n), dim3(strata_mpk::kThreads), smem, [&p, f0] {
      strata_mpk::run_task_body(p, strata_mpk::load_task(p, f0 + (int)blockIdx.x),
                                reinterpret_cast<char*>(STRATA_RT_EMU_SMEM));
    });
    first += n;
  }
  FILE* out = std::fopen(argv[2], "wb");
  if (!out) return 2;
  std::fwrite(ws.data(), 1, wsb, out);
  std::fwrite(out_tokens.data(), sizeof(int), out_tokens.size(), out);
  for (auto& b : bufs) std::fwrite(b.data(), 1, b.size(), out);
  std::fclose(out);
  return 0;
}
