"""The PyTorch producer: Hugging Face transformers, torchvision and plain torch.nn models, exported
with `torch.export` and torchax's `exported_program_to_stablehlo` (see torch_common.py).

Every model is built from a small random-initialised configuration (no download: configs are
written out here, never fetched), in eval mode (dropout off) and float32. Text models get a
batch of two with one row padded (right padding for encoders, left for decoders) and the
attention mask that says so; decoders run with use_cache=False.

    python tests/corpus/make_corpus.py --producer torch [--only NAME]

or, from tests/corpus with the generator environment's python,
`python -m producers.torch_models [NAME ...]`. An architecture that torch.export or torchax
cannot convert is listed with its error in torch/NOT_EXPORTED.md.
"""

from __future__ import annotations

import pathlib
import sys
import traceback

import numpy as np

from producers import torch_common as tc
from producers.torch_common import torch

PRODUCER = tc.PRODUCER
VOCAB = 96
BATCH, SEQ = 2, 8

CASES = {}  # name -> builder(name) -> dict of add_entry keyword arguments


def case(name):
    def register(builder):
        CASES[name] = builder
        return builder
    return register


class Outputs(torch.nn.Module):
    """Calls a Hugging Face model with keyword inputs and returns the named outputs as a tuple
    (the exported function's results, in this order)."""

    def __init__(self, model, input_keys, output_keys, **fixed):
        super().__init__()
        self.model = model
        self.input_keys = tuple(input_keys)
        self.output_keys = tuple(output_keys)
        self.fixed = fixed

    def forward(self, *inputs):
        out = self.model(**dict(zip(self.input_keys, inputs)), **self.fixed)
        return tuple(out[k] for k in self.output_keys)


def text_batch(name, vocab=VOCAB, batch=BATCH, seq=SEQ, pad="right", pad_id=0, n_pad=3,
               low=3):
    """Token ids and an attention mask whose last row has `n_pad` padding positions."""
    rng = tc.rng_for(name)
    ids = rng.integers(low, vocab, (batch, seq)).astype(np.int64)
    mask = np.ones((batch, seq), np.int64)
    if n_pad:
        if pad == "right":
            mask[-1, seq - n_pad:] = 0
        else:
            mask[-1, :n_pad] = 0
        ids[mask == 0] = pad_id
    return torch.from_numpy(ids), torch.from_numpy(mask)


def images(name, batch=BATCH, channels=3, size=32):
    rng = tc.rng_for(name)
    return torch.from_numpy(rng.standard_normal((batch, channels, size, size)).astype(np.float32))


def seeded(name):
    torch.manual_seed(tc.seed_for(name))


def randomize_batch_norm(model):
    """Non-trivial running statistics and affine parameters, as a trained model has (fresh
    ones make batch norm nearly the identity, and a tiny network's output nearly zero)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                if m.affine:
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.5, 0.5)
    return model


def hf_text(name, model, *, family, gelu, pad, pad_id, description, outputs=("logits",),
            with_mask=True, notes="", **fixed):
    ids, mask = text_batch(name, pad=pad, pad_id=pad_id)
    keys = ["input_ids", "attention_mask"] if with_mask else ["input_ids"]
    inputs = [ids, mask] if with_mask else [ids]
    if not with_mask:
        ids[:] = torch.where(mask.bool(), ids, torch.full_like(ids, pad_id))
    return dict(module=Outputs(model, keys, outputs, **fixed), inputs=inputs, input_names=keys,
                model=description, family=family, gelu=gelu, output_names=list(outputs),
                notes=notes,
                construction=f"{type(model).__name__}({type(model.config).__name__}(...)) "
                             f"random init; outputs {list(outputs)}")


def small_text_config(cls, **overrides):
    return cls(**{"vocab_size": VOCAB, **overrides})


# ------------------------------------------------------------------ encoders

@case("hf_bert")
def _bert(name):
    from transformers import BertConfig, BertModel
    seeded(name)
    cfg = small_text_config(BertConfig, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=64, max_position_embeddings=32,
                            attn_implementation="sdpa")
    return hf_text(name, BertModel(cfg), family="encoder", gelu="exact", pad="right", pad_id=0,
                   description="BERT encoder (2 layers, hidden 32), SDPA attention, padded batch",
                   outputs=("last_hidden_state", "pooler_output"))


@case("hf_bert_vjp")
def _bert_vjp(name):
    spec = _bert("hf_bert")
    spec.update(vjp_order=1,
                model="the BERT encoder of hf_bert (same weights and inputs), serialized with "
                      "vjp_order=1: the artifact also carries JAX's VJP of torchax's function "
                      "(exact GELU differentiated by JAX's own erf rule)")
    return spec


@case("hf_roberta")
def _roberta(name):
    from transformers import RobertaConfig, RobertaModel
    seeded(name)
    cfg = small_text_config(RobertaConfig, hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=4, intermediate_size=64,
                            max_position_embeddings=40, pad_token_id=1,
                            attn_implementation="eager")
    return hf_text(name, RobertaModel(cfg, add_pooling_layer=False), family="encoder",
                   gelu="exact", pad="right", pad_id=1,
                   description="RoBERTa encoder (2 layers, hidden 32), eager attention, padded "
                               "batch (position ids from the padding)",
                   outputs=("last_hidden_state",))


@case("hf_distilbert")
def _distilbert(name):
    from transformers import DistilBertConfig, DistilBertForSequenceClassification
    seeded(name)
    cfg = small_text_config(DistilBertConfig, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                            max_position_embeddings=32, num_labels=3,
                            attn_implementation="eager")
    return hf_text(name, DistilBertForSequenceClassification(cfg), family="encoder",
                   gelu="exact", pad="right", pad_id=0,
                   description="DistilBERT sequence classifier (2 layers, dim 32), padded batch")


@case("hf_distilbert_dynamic_batch")
def _distilbert_dynamic(name):
    spec = _distilbert("hf_distilbert")
    ids, mask = text_batch(name, batch=3)
    batch = torch.export.Dim("batch", min=1, max=64)
    # The wrapper's forward(*inputs) takes the inputs as one var-positional argument.
    spec.update(inputs=[ids, mask], dynamic_shapes=(({0: batch}, {0: batch}),),
                model="the DistilBERT sequence classifier exported with a dynamic batch "
                      "(torch.export.Dim('batch', min=1, max=64) on ids and mask): "
                      "shape-polymorphic StableHLO with shape assertions; args for batch 3, "
                      "last row padded")
    return spec


@case("hf_albert")
def _albert(name):
    from transformers import AlbertConfig, AlbertForMaskedLM
    seeded(name)
    cfg = small_text_config(AlbertConfig, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=4, intermediate_size=64,
                            max_position_embeddings=32, attn_implementation="eager")
    return hf_text(name, AlbertForMaskedLM(cfg), family="encoder", gelu="tanh (gelu_new)",
                   pad="right", pad_id=0,
                   description="ALBERT masked LM (shared layer applied twice, hidden 32), padded "
                               "batch")


@case("hf_electra")
def _electra(name):
    from transformers import ElectraConfig, ElectraForPreTraining
    seeded(name)
    cfg = small_text_config(ElectraConfig, embedding_size=16, hidden_size=32,
                            num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                            max_position_embeddings=32, attn_implementation="eager")
    return hf_text(name, ElectraForPreTraining(cfg), family="encoder", gelu="exact",
                   pad="right", pad_id=0,
                   description="ELECTRA discriminator (2 layers, hidden 32), padded batch")


@case("hf_deberta_v2")
def _deberta(name):
    from transformers import DebertaV2Config, DebertaV2Model
    seeded(name)
    cfg = small_text_config(DebertaV2Config, hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=4, intermediate_size=64,
                            max_position_embeddings=32, relative_attention=True,
                            position_buckets=8, max_relative_positions=16,
                            pos_att_type=["p2c", "c2p"], norm_rel_ebd="layer_norm")
    return hf_text(name, DebertaV2Model(cfg), family="encoder", gelu="exact", pad="right",
                   pad_id=0,
                   description="DeBERTa-v2 encoder (disentangled relative attention, 2 layers, "
                               "hidden 32), padded batch",
                   outputs=("last_hidden_state",))


# ------------------------------------------------------------------ decoders

def decoder(name, model, *, gelu, description, pad_id=0, notes=""):
    return hf_text(name, model, family="decoder", gelu=gelu, pad="left", pad_id=pad_id,
                   description=description + ", use_cache=False, left-padded batch",
                   use_cache=False, notes=notes)


@case("hf_gpt2")
def _gpt2(name):
    from transformers import GPT2Config, GPT2LMHeadModel
    seeded(name)
    cfg = small_text_config(GPT2Config, n_positions=32, n_embd=32, n_layer=2, n_head=4,
                            use_cache=False, attn_implementation="eager")
    return decoder(name, GPT2LMHeadModel(cfg), gelu="tanh (gelu_new)",
                   description="GPT-2 LM (2 layers, 32 wide, tied embeddings)")


@case("hf_gpt_neo")
def _gpt_neo(name):
    from transformers import GPTNeoConfig, GPTNeoForCausalLM
    seeded(name)
    cfg = small_text_config(GPTNeoConfig, max_position_embeddings=32, hidden_size=32,
                            num_layers=2, num_heads=4, attention_types=[[["global", "local"], 1]],
                            window_size=4, intermediate_size=64, use_cache=False,
                            attn_implementation="eager")
    return decoder(name, GPTNeoForCausalLM(cfg), gelu="tanh (gelu_new)",
                   description="GPT-Neo LM (one global and one local-window layer, 32 wide)")


@case("hf_opt")
def _opt(name):
    from transformers import OPTConfig, OPTForCausalLM
    seeded(name)
    cfg = small_text_config(OPTConfig, hidden_size=32, num_hidden_layers=2, ffn_dim=64,
                            num_attention_heads=4, max_position_embeddings=32,
                            word_embed_proj_dim=32, pad_token_id=1, use_cache=False,
                            attn_implementation="eager")
    return decoder(name, OPTForCausalLM(cfg), gelu="none (relu)", pad_id=1,
                   description="OPT LM (2 layers, 32 wide)")


@case("hf_opt_vjp")
def _opt_vjp(name):
    spec = _opt("hf_opt")
    spec.update(vjp_order=1,
                model="the OPT LM of hf_opt (same weights and inputs), serialized with "
                      "vjp_order=1: the artifact also carries JAX's VJP of torchax's function, "
                      "which keeps torch's padding_idx rule (torchax's custom_jvp for "
                      "embeddings: the padding row gets no gradient from the lookup), a rule "
                      "the forward program alone cannot express",
                notes="The pad token (id 1) is OPT's padding_idx and occurs in the left-padded "
                      "row; embed_tokens is tied to lm_head, which the graph reads for both.")
    return spec


def llama_like(cls, **overrides):
    base = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=64, use_cache=False,
                attn_implementation="eager")
    return small_text_config(cls, **{**base, **overrides})


@case("hf_llama")
def _llama(name):
    from transformers import LlamaConfig, LlamaForCausalLM
    seeded(name)
    return decoder(name, LlamaForCausalLM(llama_like(LlamaConfig)), gelu="none (silu)",
                   description="Llama LM (2 layers, 32 wide, grouped-query attention, RoPE)")


@case("hf_llama_sdpa")
def _llama_sdpa(name):
    from transformers import LlamaConfig, LlamaForCausalLM
    seeded(name)
    cfg = llama_like(LlamaConfig, attn_implementation="sdpa")
    return decoder(name, LlamaForCausalLM(cfg), gelu="none (silu)",
                   description="Llama LM with SDPA attention (2 layers, 32 wide, GQA, RoPE)")


@case("hf_mistral")
def _mistral(name):
    from transformers import MistralConfig, MistralForCausalLM
    seeded(name)
    cfg = llama_like(MistralConfig, sliding_window=4)
    return decoder(name, MistralForCausalLM(cfg), gelu="none (silu)",
                   description="Mistral LM (2 layers, 32 wide, sliding window 4)")


@case("hf_qwen2")
def _qwen2(name):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    seeded(name)
    return decoder(name, Qwen2ForCausalLM(llama_like(Qwen2Config)), gelu="none (silu)",
                   description="Qwen2 LM (2 layers, 32 wide, QKV bias)")


@case("hf_phi")
def _phi(name):
    from transformers import PhiConfig, PhiForCausalLM
    seeded(name)
    cfg = small_text_config(PhiConfig, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                            num_attention_heads=4, max_position_embeddings=64,
                            partial_rotary_factor=0.5, use_cache=False,
                            attn_implementation="eager")
    return decoder(name, PhiForCausalLM(cfg), gelu="tanh (gelu_new)",
                   description="Phi LM (2 layers, 32 wide, partial rotary, parallel block)")


@case("hf_gemma")
def _gemma(name):
    from transformers import GemmaConfig, GemmaForCausalLM
    seeded(name)
    cfg = llama_like(GemmaConfig, head_dim=8, num_key_value_heads=1)
    return decoder(name, GemmaForCausalLM(cfg), gelu="tanh (gelu_pytorch_tanh)",
                   description="Gemma LM (2 layers, 32 wide, multi-query attention)")


# ------------------------------------------------------------------ mixture of experts, state space

def mixtral(name, experts):
    from transformers import MixtralConfig, MixtralForCausalLM
    seeded(name)
    cfg = llama_like(MixtralConfig, num_local_experts=4, num_experts_per_tok=2,
                     **({"experts_implementation": experts} if experts else {}))
    return hf_text(name, MixtralForCausalLM(cfg), family="mixture-of-experts",
                   gelu="none (silu)", pad="left", pad_id=0, use_cache=False,
                   description="Mixtral sparse MoE LM (4 experts, top-2, 2 layers, 32 wide, "
                               f"experts_implementation={experts or 'default'}), use_cache=False, "
                               "left-padded batch")


@case("hf_mixtral")
def _mixtral(name):
    # "batched_mm": every token's top-k experts' weights gathered and applied with bmm. The
    # default (grouped_mm) calls transformers' own custom op, which torchax has no lowering for;
    # "eager" loops over the experts that were hit, a data-dependent loop torch.export refuses
    # (see hf_mixtral_grouped_mm and hf_mixtral_eager_experts in NOT_EXPORTED.md).
    return mixtral(name, "batched_mm")


@case("hf_mixtral_eager_experts")
def _mixtral_eager(name):
    return mixtral(name, "eager")


@case("hf_mixtral_grouped_mm")
def _mixtral_grouped(name):
    return mixtral(name, None)


@case("hf_qwen2_moe")
def _qwen2_moe(name):
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM
    seeded(name)
    cfg = llama_like(Qwen2MoeConfig, num_experts=4, num_experts_per_tok=2,
                     moe_intermediate_size=32, shared_expert_intermediate_size=32,
                     decoder_sparse_step=1, experts_implementation="batched_mm")
    return hf_text(name, Qwen2MoeForCausalLM(cfg), family="mixture-of-experts",
                   gelu="none (silu)", pad="left", pad_id=0, use_cache=False,
                   description="Qwen2-MoE LM (4 experts top-2 plus a gated shared expert, "
                               "2 layers, 32 wide, experts_implementation=batched_mm), "
                               "use_cache=False, left-padded batch")


@case("hf_mamba")
def _mamba(name):
    from transformers import MambaConfig, MambaForCausalLM
    seeded(name)
    cfg = small_text_config(MambaConfig, hidden_size=32, state_size=8, num_hidden_layers=2,
                            expand=2, conv_kernel=4, time_step_rank=4, use_cache=False)
    return hf_text(name, MambaForCausalLM(cfg), family="state-space", gelu="none (silu)",
                   pad="left", pad_id=0, with_mask=False, use_cache=False,
                   description="Mamba LM (2 layers, 32 wide, state 8), the slow (pure torch) "
                               "selective scan, use_cache=False",
                   notes="Mamba takes no attention mask: the ids alone (the last row starts "
                         "with 3 pad tokens).")


# ------------------------------------------------------------------ encoder-decoder

@case("hf_t5")
def _t5(name):
    from transformers import T5Config, T5ForConditionalGeneration
    seeded(name)
    cfg = small_text_config(T5Config, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                            num_decoder_layers=2, num_heads=4,
                            relative_attention_num_buckets=8, feed_forward_proj="gated-gelu",
                            decoder_start_token_id=0, use_cache=False)
    ids, mask = text_batch(name, pad="right", pad_id=0)
    decoder_ids, _ = text_batch(name + "/decoder", seq=5, n_pad=0)
    module = Outputs(T5ForConditionalGeneration(cfg),
                     ["input_ids", "attention_mask", "decoder_input_ids"],
                     ["logits", "encoder_last_hidden_state"], use_cache=False)
    return dict(module=module, inputs=[ids, mask, decoder_ids],
                input_names=["input_ids", "attention_mask", "decoder_input_ids"],
                model="T5 (v1.1 gated-GELU) encoder-decoder (2+2 layers, d_model 32, relative "
                      "position buckets), padded encoder batch, use_cache=False",
                family="encoder-decoder", gelu="tanh (gelu_new, gated)",
                output_names=["logits", "encoder_last_hidden_state"],
                construction="T5ForConditionalGeneration(T5Config(...)) random init")


@case("hf_bart")
def _bart(name):
    from transformers import BartConfig, BartForConditionalGeneration
    seeded(name)
    cfg = small_text_config(BartConfig, d_model=32, encoder_layers=2, decoder_layers=2,
                            encoder_attention_heads=4, decoder_attention_heads=4,
                            encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=32,
                            pad_token_id=1, use_cache=False, attn_implementation="eager")
    ids, mask = text_batch(name, pad="right", pad_id=1)
    decoder_ids, _ = text_batch(name + "/decoder", seq=5, n_pad=0)
    module = Outputs(BartForConditionalGeneration(cfg),
                     ["input_ids", "attention_mask", "decoder_input_ids"], ["logits"],
                     use_cache=False)
    return dict(module=module, inputs=[ids, mask, decoder_ids],
                input_names=["input_ids", "attention_mask", "decoder_input_ids"],
                model="BART encoder-decoder (2+2 layers, d_model 32), padded encoder batch, "
                      "use_cache=False",
                family="encoder-decoder", gelu="exact", output_names=["logits"],
                construction="BartForConditionalGeneration(BartConfig(...)) random init")


# ------------------------------------------------------------------ vision

def hf_vision(name, model, *, gelu, description, outputs=("logits",)):
    return dict(module=Outputs(model, ["pixel_values"], outputs), inputs=[images(name)],
                input_names=["pixel_values"], model=description, family="vision", gelu=gelu,
                output_names=list(outputs),
                construction=f"{type(model).__name__}({type(model.config).__name__}(...)) "
                             f"random init")


@case("hf_vit")
def _vit(name):
    from transformers import ViTConfig, ViTForImageClassification
    seeded(name)
    cfg = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32,
                    num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                    num_labels=10, attn_implementation="eager")
    return hf_vision(name, ViTForImageClassification(cfg), gelu="exact",
                     description="ViT classifier (32x32 images, 8x8 patches, 2 layers, hidden 32)")


@case("hf_swin")
def _swin(name):
    from transformers import SwinConfig, SwinForImageClassification
    seeded(name)
    cfg = SwinConfig(image_size=32, patch_size=4, num_channels=3, embed_dim=16, depths=[2, 1],
                     num_heads=[2, 4], window_size=4, mlp_ratio=2.0, num_labels=10)
    return hf_vision(name, SwinForImageClassification(cfg), gelu="exact",
                     description="Swin classifier (32x32, patch 4, window 4 with shifted "
                                 "windows, stages 2+1, embed 16)")


@case("hf_convnext")
def _convnext(name):
    from transformers import ConvNextConfig, ConvNextForImageClassification
    seeded(name)
    cfg = ConvNextConfig(num_channels=3, patch_size=4, num_stages=2, hidden_sizes=[16, 32],
                         depths=[1, 1], image_size=32, num_labels=10)
    return hf_vision(name, ConvNextForImageClassification(cfg), gelu="exact",
                     description="ConvNeXt classifier (stages 16/32 wide, 7x7 depthwise convs, "
                                 "layer scale)")


@case("hf_resnet")
def _resnet(name):
    from transformers import ResNetConfig, ResNetForImageClassification
    seeded(name)
    cfg = ResNetConfig(num_channels=3, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                       layer_type="basic", num_labels=10)
    return hf_vision(name, ResNetForImageClassification(cfg), gelu="none (relu)",
                     description="ResNet classifier (basic blocks, stages 16/32 wide, batch norm "
                                 "in eval)")


# ------------------------------------------------------------------ audio

@case("hf_whisper")
def _whisper(name):
    from transformers import WhisperConfig, WhisperForConditionalGeneration
    seeded(name)
    cfg = WhisperConfig(vocab_size=VOCAB, num_mel_bins=16, encoder_layers=2,
                        encoder_attention_heads=4, decoder_layers=2, decoder_attention_heads=4,
                        d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64,
                        max_source_positions=16, max_target_positions=16, pad_token_id=0,
                        bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
                        suppress_tokens=None, begin_suppress_tokens=None, use_cache=False,
                        attn_implementation="eager")
    rng = tc.rng_for(name)
    features = torch.from_numpy(rng.standard_normal((BATCH, 16, 32)).astype(np.float32))
    decoder_ids, _ = text_batch(name + "/decoder", seq=5, n_pad=0)
    module = Outputs(WhisperForConditionalGeneration(cfg), ["input_features", "decoder_input_ids"],
                     ["logits"], use_cache=False)
    return dict(module=module, inputs=[features, decoder_ids],
                input_names=["input_features", "decoder_input_ids"],
                model="Whisper encoder-decoder (16 mel bins x 32 frames, 2+2 layers, d_model 32), "
                      "use_cache=False",
                family="audio", gelu="exact", output_names=["logits"],
                construction="WhisperForConditionalGeneration(WhisperConfig(...)) random init")


@case("hf_wav2vec2")
def _wav2vec2(name):
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC
    seeded(name)
    cfg = Wav2Vec2Config(vocab_size=32, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=4, intermediate_size=64, conv_dim=(16, 16),
                         conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=8,
                         num_conv_pos_embedding_groups=4, feat_extract_norm="group",
                         do_stable_layer_norm=False, attn_implementation="eager")
    rng = tc.rng_for(name)
    audio = torch.from_numpy(rng.standard_normal((BATCH, 400)).astype(np.float32))
    return dict(module=Outputs(Wav2Vec2ForCTC(cfg), ["input_values"], ["logits"]),
                inputs=[audio], input_names=["input_values"],
                model="Wav2Vec2 CTC (conv feature encoder with group norm, weight-normed "
                      "positional conv, 2 layers, hidden 32) on 400 raw samples",
                family="audio", gelu="exact", output_names=["logits"],
                construction="Wav2Vec2ForCTC(Wav2Vec2Config(...)) random init")


# ------------------------------------------------------------------ torchvision

@case("tv_regnet")
def _tv_regnet(name):
    from torchvision.models.regnet import BlockParams, RegNet
    seeded(name)
    params = BlockParams.from_init_params(depth=3, w_0=8, w_a=8.0, w_m=2.0, group_width=8)
    model = randomize_batch_norm(RegNet(params, num_classes=10, stem_width=8))
    return dict(module=model, inputs=[images(name)], input_names=["x"],
                model="torchvision RegNet (3 blocks, widths 8..32, grouped convs, "
                      "squeeze-excitation off, batch norm in eval with randomized statistics)",
                family="convolutional", gelu="none (relu)",
                construction="torchvision.models.regnet.RegNet(BlockParams.from_init_params("
                             "depth=3, w_0=8, w_a=8.0, w_m=2.0, group_width=8), num_classes=10, "
                             "stem_width=8)")


@case("tv_mobilenet_v3")
def _tv_mobilenet(name):
    from torchvision.models import mobilenet_v3_small
    seeded(name)
    model = randomize_batch_norm(mobilenet_v3_small(weights=None, width_mult=0.25,
                                                    num_classes=10))
    with torch.no_grad():  # torchvision initialises the classifier at std 0.01
        for m in model.classifier.modules():
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.xavier_uniform_(m.weight)
    return dict(module=model, inputs=[images(name)], input_names=["x"],
                model="torchvision MobileNetV3-small (width 0.25; hardswish, squeeze-excitation, "
                      "depthwise convs, batch norm in eval with randomized statistics)",
                family="convolutional", gelu="none (hardswish)",
                construction="torchvision.models.mobilenet_v3_small(weights=None, "
                             "width_mult=0.25, num_classes=10)")


# ------------------------------------------------------------------ plain torch.nn

class GeluMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
            torch.nn.Linear(32, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))

    def forward(self, x):
        return torch.log_softmax(self.net(x), dim=-1)


@case("nn_gelu_mlp")
def _gelu_mlp(name):
    seeded(name)
    rng = tc.rng_for(name)
    x = torch.from_numpy((2.0 * rng.standard_normal((6, 16))).astype(np.float32))
    return dict(module=GeluMLP(), inputs=[x], input_names=["x"],
                model="MLP 16-32-32-4 with exact GELU (nn.GELU()) and layer norm, log_softmax",
                family="mlp", gelu="exact")


@case("nn_gelu_mlp_dynamic_batch")
def _gelu_mlp_dynamic(name):
    seeded("nn_gelu_mlp")
    rng = tc.rng_for(name)
    x = torch.from_numpy((2.0 * rng.standard_normal((5, 16))).astype(np.float32))
    batch = torch.export.Dim("batch", min=1, max=1024)
    return dict(module=GeluMLP(), inputs=[x], input_names=["x"],
                dynamic_shapes=({0: batch},),
                model="the exact-GELU MLP exported with a dynamic batch (torch.export.Dim('batch', "
                      "min=1, max=1024)): shape-polymorphic StableHLO with shape assertions; args "
                      "for batch 5",
                family="mlp", gelu="exact")


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3, stride=2, padding=1), torch.nn.BatchNorm2d(16),
            torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1))
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


@case("nn_cnn_batchnorm")
def _cnn(name):
    seeded(name)
    model = randomize_batch_norm(SmallCNN())
    return dict(module=model, inputs=[images(name)], input_names=["x"],
                model="CNN: conv-BN-relu-maxpool, strided conv-BN-relu, global average pool, "
                      "linear (batch norm in eval with non-trivial running statistics)",
                family="convolutional", gelu="none (relu)")


class Recurrent(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}[kind]
        self.rnn = cls(input_size=8, hidden_size=16, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        seq, _ = self.rnn(x)
        return self.head(seq)


def recurrent(name, kind):
    seeded(name)
    rng = tc.rng_for(name)
    x = torch.from_numpy(rng.standard_normal((BATCH, 6, 8)).astype(np.float32))
    return dict(module=Recurrent(kind), inputs=[x], input_names=["x"],
                model=f"2-layer {kind.upper()} (input 8, hidden 16, 6 steps, batch_first) and a "
                      f"linear head on every step",
                family="recurrent", gelu="none")


@case("nn_lstm")
def _lstm(name):
    return recurrent(name, "lstm")


@case("nn_gru")
def _gru(name):
    return recurrent(name, "gru")


# ------------------------------------------------------------------ building

# Why a case fails, as far as it was traced (NOT_EXPORTED.md's last column).
FAILURE_NOTES = {
    "hf_gpt_neo": "torchax bug: it passes the states as parameters + buffers + lifted "
                  "constants, but this graph's placeholders interleave buffers and constants "
                  "(layer 0's causal-mask buffer, layer 0's mask-value constant, layer 1's "
                  "buffer, ...), so the (1,1,32,32) buffer reaches a scalar constant's "
                  "placeholder.",
    "hf_mixtral_eager_experts": "transformers' eager experts loop over the experts that were "
                                "hit (nonzero of the routing mask), a data-dependent loop that "
                                "torch.export refuses; hf_mixtral uses batched_mm instead.",
    "hf_mixtral_grouped_mm": "transformers' default experts implementation calls its own custom "
                             "op transformers::grouped_mm_fallback, which torchax has no "
                             "lowering for; hf_mixtral uses batched_mm instead.",
}


def _one_line(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".strip()
    first = text.splitlines()[0] if text else type(error).__name__
    return first[:400]


def build(corpus_root, only=None):
    """Writes every entry (or the one named `only`) under corpus_root/torch/, and records the
    cases that failed to export in torch/NOT_EXPORTED.md."""
    root = pathlib.Path(corpus_root)
    versions = tc.versions()
    names = [only] if only else list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        raise SystemExit(f"no torch corpus case named {unknown}; have {sorted(CASES)}")
    failed = {}
    for name in names:
        try:
            spec = CASES[name](name)
        except Exception as e:  # noqa: BLE001 - a model the installed packages cannot build
            failed[name] = ("build", _one_line(e))
            print(f"torch/{name}: build failed: {_one_line(e)}", file=sys.stderr)
            continue
        try:
            _, extra = tc.add_entry(root, name, versions_=versions, **spec)
        except tc.StageError as e:  # recorded in NOT_EXPORTED.md
            failed[name] = (e.stage, _one_line(e.error))
            print(f"torch/{name}: {e.stage} failed: {_one_line(e.error)}", file=sys.stderr)
            if "--traceback" in sys.argv:
                traceback.print_exc()
            continue
        except Exception as e:  # noqa: BLE001 - recorded in NOT_EXPORTED.md
            failed[name] = ("goldens", _one_line(e))
            print(f"torch/{name}: export failed: {_one_line(e)}", file=sys.stderr)
            if "--traceback" in sys.argv:
                traceback.print_exc()
            continue
        print(f"torch/{name}: ok; torchax forward err "
              f"{extra['torchax_export_vs_eager_forward_max_abs_err']:.2e}, torchax jax.grad "
              f"rel err {extra.get('torchax_jax_grad_max_rel_err', float('nan')):.2e}",
              file=sys.stderr)
    _write_not_exported(root / PRODUCER, failed, names, versions)
    return failed


def _read_not_exported(path: pathlib.Path) -> dict:
    rows = {}
    if path.exists():
        for line in path.read_text().splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 3 and cells[0] in CASES:
                rows[cells[0]] = (cells[1], cells[2].strip("`"))
    return rows


def _write_not_exported(folder: pathlib.Path, failed: dict, attempted, versions: dict):
    """Rewrites NOT_EXPORTED.md: the cases built now replace their rows (a case that exported
    loses its row); the others keep theirs."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "NOT_EXPORTED.md"
    failed = {**{k: v for k, v in _read_not_exported(path).items() if k not in attempted},
              **failed}
    lines = ["# Models the PyTorch producer could not export",
             "",
             "Written by `tests/corpus/producers/torch_models.py` (each build updates the rows of "
             "the cases it built): each model below "
             "is in its case list but building it, `torch.export.export`, torchax's "
             "`exported_program_to_stablehlo` or computing its goldens failed (the stage "
             "column), so it has no entry. The error is the first line of the exception.",
             "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())),
             ""]
    if not failed:
        lines.append("None: every case exported.")
    else:
        lines += ["| model | stage | error | why |", "| --- | --- | --- | --- |"]
        for name, (stage, error) in sorted(failed.items()):
            lines.append(f"| {name} | {stage} | `{error.replace('|', '/')}` | "
                         f"{FAILURE_NOTES.get(name, '')} |")
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    here = pathlib.Path(__file__).resolve().parents[1]
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) > 1:
        for n in args:
            build(here, only=n)
    else:
        build(here, only=args[0] if args else None)
