"""Reference models in plain PyTorch used by strata's tests and benchmarks."""
from .llama_layer import LlamaConfig, LlamaDecoderLayer, rotary_tables

__all__ = ["LlamaConfig", "LlamaDecoderLayer", "rotary_tables"]
