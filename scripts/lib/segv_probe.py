import strata, faulthandler, sys
faulthandler.enable()
prog = strata.Program.parse("input X: f16[8, 1024]\ninput W: f16[1024, 2048]\nO = matmul(rms_norm(X), W)\noutput O\n")
print("profile off:", strata.optimize(prog, top_k=2, profile=False) is not None, flush=True)
r = strata.optimize(prog, top_k=2)
print("profiled", r.gpu_profile is not None, flush=True)
