"""torch.mm on the shapes of bench/micro/gemm_api.cu, timed the same way (median of 7 rounds of
40 back-to-back launches, operands rotated over enough copies to exceed L2), so that its output
compares with that of bench/micro/run-gemm-api.sh. Usage: python3 bench/micro/torch_mm.py"""
import torch

SHAPES = [
    ("qwen25_7b_mlp_down_p512 up", 512, 18944, 3584),
    ("qwen25_7b_mlp_down_p512 down", 512, 3584, 18944),
    ("llama32_1b_mlp_p4096 up", 4096, 8192, 2048),
    ("llama32_1b_qkv_p2048 qkv", 2048, 3072, 2048),
    ("mistral_7b_qkv_p4096 qkv", 4096, 6144, 4096),
    ("llama3_8b_mlp_p2048 up", 2048, 14336, 4096),
    ("qwen25_7b_lora_down_r64_p512", 512, 3584, 18944),
]


def main():
    print(f"torch {torch.__version__}, preferred BLAS {torch.backends.cuda.preferred_blas_library()}")
    for name, m, n, k in SHAPES:
        copies = max(1, min(4, (200 << 20) // ((m * k + k * n) * 2) + 1))
        a = [torch.randn(m, k, device="cuda", dtype=torch.float16) * 0.1 for _ in range(copies)]
        b = [torch.randn(k, n, device="cuda", dtype=torch.float16) * 0.1 for _ in range(copies)]
        out = torch.empty(m, n, device="cuda", dtype=torch.float16)
        for i in range(10):
            torch.mm(a[i % copies], b[i % copies], out=out)
        torch.cuda.synchronize()
        rounds = []
        for _ in range(7):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for i in range(40):
                torch.mm(a[i % copies], b[i % copies], out=out)
            e1.record()
            e1.synchronize()
            rounds.append(e0.elapsed_time(e1) * 1000 / 40)
        rounds.sort()
        print(f"{name + f' ({m} {n} {k})':44s} torch.mm {rounds[3]:10.2f}")


if __name__ == "__main__":
    main()
