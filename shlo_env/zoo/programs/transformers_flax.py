"""Hugging Face transformers' Flax models (transformers 4.x; 5.x dropped Flax), small configs.

Models are built from a config with random weights (`Model(config, seed=0)`), never
`from_pretrained`. Inference programs take the parameters as their first argument; train steps
take parameters and optax state and return the updated ones with the loss.
"""

from __future__ import annotations

import jax
import numpy as np
import optax
from transformers import (BertConfig, FlaxBertForMaskedLM, FlaxBertForSequenceClassification,
                          FlaxGPT2LMHeadModel, FlaxResNetForImageClassification, FlaxBartForConditionalGeneration,
                          FlaxViTForImageClassification, BartConfig, GPT2Config, ResNetConfig, ViTConfig)

from shlo_env.zoo.programs import optax_step, program

VOCAB = 2048


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _tokens(seed: int, batch: int, seq: int) -> np.ndarray:
    return _rng(seed).integers(0, VOCAB, size=(batch, seq)).astype(np.int32)


def _config_dict(config) -> dict:
    keys = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
            "n_embd", "n_layer", "n_head", "d_model", "encoder_layers", "decoder_layers", "encoder_ffn_dim", "encoder_attention_heads", "image_size",
            "patch_size", "num_labels", "hidden_sizes", "depths", "embedding_size", "layer_type")
    d = config.to_dict()
    return {k: d[k] for k in keys if k in d}


def _bert_config(**kw) -> BertConfig:
    return BertConfig(vocab_size=VOCAB, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=512, max_position_embeddings=128, **kw)


def _xent(logits, labels):
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


@program("hf_bert_mlm_infer", library="transformers", kind="inference",
         description="FlaxBertForMaskedLM (2 layers, hidden 128, 4 heads, vocab 2048): "
                     "masked-LM logits for batch 4 x 64 tokens")
def hf_bert_mlm_infer():
    config = _bert_config()
    model = FlaxBertForMaskedLM(config, seed=0)
    ids = _tokens(1, 4, 64)
    mask = np.ones_like(ids)

    def forward(params, ids, mask):
        return model(ids, attention_mask=mask, params=params).logits

    return forward, (model.params, ids, mask), {**_config_dict(config), "batch": 4, "seq": 64}


@program("hf_bert_cls_train", library="transformers", kind="train_step", uses=("optax",),
         description="FlaxBertForSequenceClassification (2 layers, hidden 128, 3 labels) train step "
                     "with dropout on (the dropout key is an input), cross-entropy, optax.adamw; batch 8 x 64")
def hf_bert_cls_train():
    config = _bert_config(num_labels=3)
    model = FlaxBertForSequenceClassification(config, seed=0)
    ids = _tokens(2, 8, 64)
    labels = _rng(3).integers(0, 3, size=(8,)).astype(np.int32)
    tx = optax.adamw(2e-5, weight_decay=0.01)

    def loss_fn(params, ids, labels, key):
        logits = model(ids, params=params, dropout_rng=key, train=True).logits
        return _xent(logits, labels)

    step = optax_step(loss_fn, tx)
    key = np.asarray(jax.random.key_data(jax.random.PRNGKey(4)))
    return step, (model.params, tx.init(model.params), ids, labels, key), {
        **_config_dict(config), "batch": 8, "seq": 64, "optimizer": "adamw(2e-5, wd 0.01)", "dropout": 0.1}


def _gpt2_config(layers: int) -> GPT2Config:
    return GPT2Config(vocab_size=VOCAB, n_positions=128, n_embd=128, n_layer=layers, n_head=4)


@program("hf_gpt2_lm_infer", library="transformers", kind="inference",
         description="FlaxGPT2LMHeadModel (2 layers, 128 wide, 4 heads, vocab 2048): next-token logits "
                     "for batch 4 x 64")
def hf_gpt2_lm_infer():
    config = _gpt2_config(2)
    model = FlaxGPT2LMHeadModel(config, seed=0)
    ids = _tokens(5, 4, 64)

    def forward(params, ids):
        return model(ids, params=params).logits

    return forward, (model.params, ids), {**_config_dict(config), "batch": 4, "seq": 64}


def _causal_lm_step(model, tx):
    def loss_fn(params, ids):
        logits = model(ids, params=params).logits
        return _xent(logits[:, :-1], ids[:, 1:])

    return optax_step(loss_fn, tx)


@program("hf_gpt2_lm_train", library="transformers", kind="train_step", uses=("optax",),
         description="FlaxGPT2LMHeadModel (2 layers, 128 wide) causal-LM train step, "
                     "optax.chain(clip_by_global_norm(1), adamw); batch 4 x 64")
def hf_gpt2_lm_train():
    config = _gpt2_config(2)
    model = FlaxGPT2LMHeadModel(config, seed=0)
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(3e-4))
    ids = _tokens(6, 4, 64)
    return _causal_lm_step(model, tx), (model.params, tx.init(model.params), ids), {
        **_config_dict(config), "batch": 4, "seq": 64, "optimizer": "clip_by_global_norm(1) + adamw(3e-4)"}


@program("hf_gpt2_6l_lm_train", library="transformers", kind="train_step", uses=("optax",),
         description="FlaxGPT2LMHeadModel with 6 layers (128 wide, 4 heads) causal-LM train step, "
                     "optax.lion; batch 2 x 64 (the largest zoo program by op count)")
def hf_gpt2_6l_lm_train():
    config = _gpt2_config(6)
    model = FlaxGPT2LMHeadModel(config, seed=0)
    tx = optax.lion(1e-4, weight_decay=0.01)
    ids = _tokens(7, 2, 64)
    return _causal_lm_step(model, tx), (model.params, tx.init(model.params), ids), {
        **_config_dict(config), "batch": 2, "seq": 64, "optimizer": "lion(1e-4, wd 0.01)"}


def _vit_config() -> ViTConfig:
    return ViTConfig(image_size=32, patch_size=4, num_channels=3, hidden_size=128, num_hidden_layers=2,
                     num_attention_heads=4, intermediate_size=256, num_labels=10)


@program("hf_vit_cls_infer", library="transformers", kind="inference",
         description="FlaxViTForImageClassification (32x32 images, 4x4 patches, 2 layers, hidden 128): "
                     "logits for 8 images")
def hf_vit_cls_infer():
    config = _vit_config()
    model = FlaxViTForImageClassification(config, seed=0)
    x = _rng(8).standard_normal((8, 3, 32, 32)).astype(np.float32)

    def forward(params, x):
        return model(x, params=params).logits

    return forward, (model.params, x), {**_config_dict(config), "batch": 8}


@program("hf_vit_cls_train", library="transformers", kind="train_step", uses=("optax",),
         description="FlaxViTForImageClassification (32x32, 4x4 patches, 2 layers) train step, "
                     "cross-entropy, optax.adamw with a warmup-cosine schedule; 8 images")
def hf_vit_cls_train():
    config = _vit_config()
    model = FlaxViTForImageClassification(config, seed=0)
    x = _rng(9).standard_normal((8, 3, 32, 32)).astype(np.float32)
    y = _rng(10).integers(0, 10, size=(8,)).astype(np.int32)
    tx = optax.adamw(optax.warmup_cosine_decay_schedule(0.0, 1e-3, 100, 1000))

    def loss_fn(params, x, y):
        return _xent(model(x, params=params).logits, y)

    return optax_step(loss_fn, tx), (model.params, tx.init(model.params), x, y), {
        **_config_dict(config), "batch": 8, "optimizer": "adamw(warmup_cosine 1e-3)"}


def _bart_config(layers: int = 2) -> BartConfig:
    return BartConfig(vocab_size=VOCAB, d_model=128, encoder_layers=layers, decoder_layers=layers,
                      encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=256,
                      decoder_ffn_dim=256, max_position_embeddings=128)


@program("hf_bart_seq2seq_infer", library="transformers", kind="inference",
         description="FlaxBartForConditionalGeneration (2+2 layers, d_model 128, 4 heads; T5 4.57 calls "
                     "jnp.clip(a_max=) which this jax removed): decoder logits for batch 4, 64 source / 32 target tokens")
def hf_bart_seq2seq_infer():
    config = _bart_config()
    model = FlaxBartForConditionalGeneration(config, seed=0)
    src, tgt = _tokens(11, 4, 64), _tokens(12, 4, 32)

    def forward(params, src, tgt):
        return model(input_ids=src, decoder_input_ids=tgt, params=params).logits

    return forward, (model.params, src, tgt), {**_config_dict(config), "batch": 4, "src": 64, "tgt": 32}


@program("hf_bart_seq2seq_train", library="transformers", kind="train_step", uses=("optax",),
         description="FlaxBartForConditionalGeneration (1+1 layers, d_model 128) teacher-forced train step, "
                     "optax.adam (2+2 layers made it 5.7k ops); batch 4, 64 source / 32 target tokens")
def hf_bart_seq2seq_train():
    config = _bart_config(layers=1)
    model = FlaxBartForConditionalGeneration(config, seed=0)
    src, tgt = _tokens(13, 4, 64), _tokens(14, 4, 33)
    tx = optax.adam(1e-3)

    def loss_fn(params, src, tgt):
        logits = model(input_ids=src, decoder_input_ids=tgt[:, :-1], params=params).logits
        return _xent(logits, tgt[:, 1:])

    return optax_step(loss_fn, tx), (model.params, tx.init(model.params), src, tgt), {
        **_config_dict(config), "batch": 4, "src": 64, "tgt": 32, "optimizer": "adam(1e-3)"}


@program("hf_resnet_cls_infer", library="transformers", kind="inference",
         description="FlaxResNetForImageClassification (basic blocks, widths 32-64-128-256, one block per "
                     "stage, batch norm in inference mode): logits for 8 images of 64x64")
def hf_resnet_cls_infer():
    config = ResNetConfig(num_channels=3, embedding_size=32, hidden_sizes=[32, 64, 128, 256],
                          depths=[1, 1, 1, 1], layer_type="basic", num_labels=10)
    model = FlaxResNetForImageClassification(config, seed=0)
    x = _rng(15).standard_normal((8, 3, 64, 64)).astype(np.float32)

    def forward(params, x):
        return model(x, params=params, train=False).logits

    return forward, (model.params, x), {**_config_dict(config), "batch": 8, "image": 64}


@program("hf_bert_cls_padded_infer", library="transformers", kind="inference",
         description="FlaxBertForSequenceClassification (2 layers, hidden 128, 3 labels) with softmax "
                     "probabilities and a padding mask; batch 8 x 128 (longer sequences than the MLM)")
def hf_bert_cls_padded_infer():
    config = _bert_config(num_labels=3)
    model = FlaxBertForSequenceClassification(config, seed=0)
    ids = _tokens(16, 8, 128)
    mask = (np.arange(128)[None, :] < _rng(17).integers(32, 129, size=(8, 1))).astype(np.int32)

    def forward(params, ids, mask):
        return jax.nn.softmax(model(ids, attention_mask=mask, params=params).logits, axis=-1)

    return forward, (model.params, ids, mask), {**_config_dict(config), "batch": 8, "seq": 128}

