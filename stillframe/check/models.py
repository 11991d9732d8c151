"""Small Hugging Face ``transformers`` models with random weights, for parity tests and benchmarks.

Each model is built from a small config (2 layers, hidden size 128, vocabulary
1000) so it runs in milliseconds on a CPU; no weights are downloaded. Needs the
``models`` extra (``pip install torch==2.13.0 -e ".[models]"``).

Example::

    >>> from stillframe.check.models import build, example_inputs
    >>> model = build("gpt2")                       # eval mode, seeded weights
    >>> kwargs = example_inputs("gpt2", mask=True)  # input_ids (2, 16) int64, attention_mask (2, 16) int64
    >>> logits = model(**kwargs).logits             # (2, 16, 1000) float32
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from typing import Any

import torch

#: The models, in the order tests and benchmarks report them.
MODELS = ("gpt2", "bert", "llama", "t5")
#: Models with a causal-LM head, trained by the training-step checks.
TRAINABLE = ("gpt2", "llama")

VOCAB = 1000
BATCH, SEQ, DECODER_SEQ = 2, 16, 8


def _config(name: str) -> Any:
    import transformers as T

    if name == "gpt2":
        return T.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=VOCAB, n_positions=64,
                             bos_token_id=0, eos_token_id=0)
    if name == "bert":
        return T.BertConfig(num_hidden_layers=2, hidden_size=128, num_attention_heads=4, intermediate_size=256,
                            vocab_size=VOCAB, max_position_embeddings=64)
    if name == "llama":
        return T.LlamaConfig(num_hidden_layers=2, hidden_size=128, num_attention_heads=4, num_key_value_heads=2,
                             intermediate_size=256, vocab_size=VOCAB, max_position_embeddings=64)
    if name == "t5":
        return T.T5Config(num_layers=2, num_decoder_layers=2, d_model=128, d_ff=256, num_heads=4, d_kv=32,
                          vocab_size=VOCAB)
    raise ValueError(f"unknown model {name!r}: choose one of {', '.join(MODELS)}")


def build(name: str, *, seed: int = 0, train: bool = False) -> torch.nn.Module:
    """A freshly initialised model (``eval()`` unless ``train``), weights seeded by ``seed``.

    GPT-2 and Llama are ``*ForCausalLM`` models, BERT is ``BertModel`` and T5
    is ``T5ForConditionalGeneration``. Dropout is whatever the config gives
    (GPT-2 and BERT have 0.1), so training-mode parity checks must seed or zero it.

    Raises ValueError for an unknown name and ImportError without ``transformers``.
    """
    import transformers as T

    config = _config(name)
    config._attn_implementation = "sdpa"
    classes = {"gpt2": T.GPT2LMHeadModel, "bert": T.BertModel, "llama": T.LlamaForCausalLM,
               "t5": T.T5ForConditionalGeneration}
    torch.manual_seed(seed)
    model = classes[name](config)
    return model.train() if train else model.eval()


def example_inputs(name: str, *, mask: bool = False, labels: bool = False, seed: int = 1) -> dict[str, Any]:
    """Keyword arguments for one forward call: ``input_ids`` (BATCH, SEQ) int64 token ids in [0, VOCAB).

    ``mask``: add ``attention_mask`` (BATCH, SEQ) int64 with the second row's last 6 positions padded (0).
    ``labels``: add ``labels`` (the input ids, for the causal-LM loss). T5 always gets
    ``decoder_input_ids`` (BATCH, DECODER_SEQ) int64.
    """
    g = torch.Generator().manual_seed(seed)
    kwargs: dict[str, Any] = {"input_ids": torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)}
    if mask:
        attention_mask = torch.ones(BATCH, SEQ, dtype=torch.long)
        attention_mask[1, SEQ - 6:] = 0
        kwargs["attention_mask"] = attention_mask
    if name == "t5":
        kwargs["decoder_input_ids"] = torch.randint(0, VOCAB, (BATCH, DECODER_SEQ), generator=g)
    if labels:
        kwargs["labels"] = kwargs["input_ids"].clone()
    return kwargs


def available() -> bool:
    """Whether ``transformers`` can be imported (the ``models`` extra is installed)."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True
