// Probe of the emulated streams (runtime/strata_rt/streams.cuh, emulate.h): a producer kernel
// and a consumer kernel on two streams of a StreamFork, with and without the events that order
// them. Usage: probe MODE [reverse]; prints the value the consumer read and exits 0 when it is
// the producer's, 1 when the consumer read the buffer before the producer wrote it; the
// emulator aborts where the fork itself is wrong (an unjoined side stream, an event waited on
// before it is recorded).
//   ok          producer on side stream 1, stream 0 waits its event, consumer on stream 0
//   no_wait     the same without the wait (stream 0 joins stream 1 only at the end)
//   side_ok     producer on stream 0, stream 1 waits its event, consumer on stream 1, joined
//   side_no_wait  the same without stream 1's wait (caught when the streams run reversed)
//   no_join     producer on stream 1 and nothing waits on it
//   unrecorded  stream 0 waits on an event never recorded
#include "strata_rt/strata_rt.cuh"
#include "strata_rt/host.cuh"
#include "strata_rt/streams.cuh"

#include <cstdio>
#include <cstring>
#include <string>

extern "C" __global__ void __launch_bounds__(32) produce(float* buf) {
  if (threadIdx.x == 0) buf[0] = 7.0f;
}
extern "C" __global__ void __launch_bounds__(32) consume(const float* buf, float* out) {
  if (threadIdx.x == 0) out[0] = buf[0];
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string mode = argv[1];
  strata_rt::emu::settings().reverse = argc > 2 && std::strcmp(argv[2], "reverse") == 0;
  float buf = 0.0f, out = -1.0f;
  float* b = &buf;
  float* o = &out;
  cudaStream_t stream = nullptr;
  strata_rt::host::LaunchStreams streams(1, 2);
  {
    strata_rt::host::StreamFork fork(streams, stream);
    fork.record(0, 0);
    if (mode == "ok" || mode == "no_wait" || mode == "no_join") {
      fork.wait(1, 0);
      STRATA_RT_LAUNCH(produce, dim3(1), dim3(32), 0, fork.stream(1), b);
      fork.record(1, 1);
      if (mode == "ok") fork.wait(0, 1);
      if (mode != "no_join") STRATA_RT_LAUNCH(consume, dim3(1), dim3(32), 0, stream, b, o);
      if (mode == "no_wait") fork.wait(0, 1);
    } else if (mode == "side_ok" || mode == "side_no_wait") {
      STRATA_RT_LAUNCH(produce, dim3(1), dim3(32), 0, stream, b);
      fork.record(1, 0);
      if (mode == "side_ok") fork.wait(1, 1);
      STRATA_RT_LAUNCH(consume, dim3(1), dim3(32), 0, fork.stream(1), b, o);
      fork.record(0, 1);
      fork.wait(0, 0);
    } else if (mode == "unrecorded") {
      fork.wait(0, 1);
    } else {
      return 2;
    }
    fork.finish(0);
  }
  std::printf("read %g\n", out);
  return mode == "no_join" || out == 7.0f ? 0 : 1;
}
