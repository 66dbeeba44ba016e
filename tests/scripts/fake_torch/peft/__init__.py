"""peft as tests/scripts/fake_torch needs it: adapters are one more trainable parameter, the base frozen."""
import torch


class LoraConfig:
    def __init__(self, **kw):
        self.r = kw.get("r", 8)


def get_peft_model(model, config):
    for p in model._params:
        p.requires_grad = False
    model._params.append(torch._Parameter((config.r, model.config.hidden)))  # fp32, as peft keeps adapters
    return model
