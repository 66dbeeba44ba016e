"""transformers as tests/scripts/fake_torch needs it: the five config classes the collector builds and a
model factory returning torch's fake model (see torch/__init__.py there)."""
import torch

__version__ = "0.0-fake"


class _Config:
    def __init__(self, **kw):
        self.__dict__.update(kw)
        self.hidden = kw.get("n_embd", kw.get("hidden_size"))
        self.heads = kw.get("n_head", kw.get("num_attention_heads"))
        self.layers = kw.get("n_layer", kw.get("num_hidden_layers"))
        self._attn_implementation = "sdpa"


class GPT2Config(_Config):
    pass


class LlamaConfig(_Config):
    pass


class MistralConfig(_Config):
    pass


class Qwen2Config(_Config):
    pass


class Phi3Config(_Config):
    pass


class AutoModelForCausalLM:
    @staticmethod
    def from_config(config, attn_implementation=None):
        if attn_implementation is not None:
            config._attn_implementation = attn_implementation
        return torch._FakeModel(config)
