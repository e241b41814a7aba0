"""The speech and text models of the corpus (issue 37): torchaudio's models
that script or trace, a transform chain (MelSpectrogram into a small CNN),
and text encoders run with padding masks (nn.TransformerEncoder's nested-
tensor fast path; torchtext's RoBERTa encoder code). Random weights, eval
mode, seeded example inputs; no download.

Each entry has two sizes: `small` (what plain ctest runs, a few seconds per
optimization on 2 cores) and `full` (the published configurations:
wav2vec2/HuBERT base, conv_tasnet_base, emformer_rnnt_base, ...; the corpus
configuration). A model whose package is not installed (torchaudio is not on
PyPI for every PyTorch) is listed with the reason.

`quantize` says which int8 mode suits the model: "static" for the conv nets
(calibrated), "dynamic" for those whose work is in linears and RNNs.
"""
import importlib.util
import os
import sys

import torch


def _torchaudio():
    try:
        import torchaudio  # noqa: F401
        import torchaudio.models  # noqa: F401
        return torchaudio, ""
    except Exception as e:  # not installed, or built for another torch
        return None, f"torchaudio is not importable here ({type(e).__name__}: {str(e).splitlines()[0][:80]})"


# torchtext's RoBERTa encoder, read from its source file: Debian's torchtext
# package has the model code, but its compiled extension does not import on
# every Python, and the model code does not need it.
ROBERTA_DIRS = [os.path.join(p, "torchtext", "models", "roberta") for p in sys.path if p] + [
    "/usr/lib/python3/dist-packages/torchtext/models/roberta"]


def _roberta_module():
    for d in ROBERTA_DIRS:
        if os.path.isfile(os.path.join(d, "model.py")) and os.path.isfile(os.path.join(d, "modules.py")):
            spec = importlib.util.spec_from_file_location(
                "ptopt_corpus_roberta", os.path.join(d, "__init__.py") if os.path.isfile(os.path.join(d, "__init__.py"))
                else os.path.join(d, "model.py"), submodule_search_locations=[d])
            pkg = importlib.util.module_from_spec(spec)
            sys.modules["ptopt_corpus_roberta"] = pkg
            for sub in ("modules", "model"):
                s = importlib.util.spec_from_file_location(f"ptopt_corpus_roberta.{sub}", os.path.join(d, f"{sub}.py"))
                m = importlib.util.module_from_spec(s)
                sys.modules[f"ptopt_corpus_roberta.{sub}"] = m
                s.loader.exec_module(m)
            return sys.modules["ptopt_corpus_roberta.model"], ""
    return None, "torchtext's RoBERTa model code is not installed (python3-torchtext)"


class Entry:
    def __init__(self, name, family, build, inputs, quantize="dynamic", trace=True, note=""):
        self.name, self.family, self._build, self._inputs = name, family, build, inputs
        self.quantize, self.trace, self.note = quantize, trace, note

    def build(self, size):
        torch.manual_seed(0)
        return self._build(size).eval()

    def inputs(self, size, seed=1):
        g = torch.Generator().manual_seed(seed)
        return self._inputs(size, g)


class MelCnn(torch.nn.Module):
    """A keyword-spotting style chain: waveform -> log-mel -> two convs -> classes."""

    def __init__(self, ta, n_mels):
        super().__init__()
        self.mel = ta.transforms.MelSpectrogram(sample_rate=16000, n_fft=400, hop_length=160, n_mels=n_mels)
        self.db = ta.transforms.AmplitudeToDB()
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
            torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Dropout(0.2), torch.nn.Linear(32, 12))

    def forward(self, waveform: torch.Tensor):
        return self.net(self.db(self.mel(waveform)).unsqueeze(1))


class PaddedTextEncoder(torch.nn.Module):
    """Token embedding, nn.TransformerEncoder(enable_nested_tensor=True) with a padding mask, a head."""

    def __init__(self, d, layers):
        super().__init__()
        self.emb = torch.nn.Embedding(1000, d)
        layer = torch.nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.1, batch_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=True)
        self.head = torch.nn.Linear(d, 8)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor):
        return self.head(self.enc(self.emb(tokens), src_key_padding_mask=mask).mean(1))


def _tokens_and_mask(size, g, vocab=1000, pad=None):
    b, t = (2, 12) if size == "small" else (4, 128)
    tokens = torch.randint(2, vocab, (b, t), generator=g)
    mask = torch.zeros(b, t, dtype=torch.bool)
    mask[1, t * 2 // 3:] = True  # the second sequence is shorter
    if pad is not None:
        tokens[mask] = pad
        return [tokens]
    return [tokens, mask]


def entries():
    ta, why_not_ta = _torchaudio()
    roberta, why_not_roberta = _roberta_module()
    out = []

    def audio(name, build, inputs, **kw):
        out.append(Entry(name, "speech", build if ta else None, inputs, note=why_not_ta if not ta else kw.pop("note", ""),
                         **kw))

    if ta:
        M = ta.models

        def w2v(size, layer_norm_first):
            if size == "full":
                return (M.wav2vec2_large if layer_norm_first else M.wav2vec2_base)(aux_num_out=32)
            return M.wav2vec2_model(
                extractor_mode="layer_norm" if layer_norm_first else "group_norm", extractor_conv_layer_config=None,
                extractor_conv_bias=layer_norm_first, encoder_embed_dim=96, encoder_projection_dropout=0.1,
                encoder_pos_conv_kernel=32, encoder_pos_conv_groups=4, encoder_num_layers=2, encoder_num_heads=4,
                encoder_attention_dropout=0.1, encoder_ff_interm_features=192, encoder_ff_interm_dropout=0.1,
                encoder_dropout=0.1, encoder_layer_norm_first=layer_norm_first, encoder_layer_drop=0.1,
                aux_num_out=32)

        def hubert(size):
            if size == "full":
                return M.hubert_base(aux_num_out=32)
            return M.wav2vec2_model(
                extractor_mode="group_norm", extractor_conv_layer_config=None, extractor_conv_bias=False,
                encoder_embed_dim=96, encoder_projection_dropout=0.1, encoder_pos_conv_kernel=32,
                encoder_pos_conv_groups=4, encoder_num_layers=3, encoder_num_heads=4, encoder_attention_dropout=0.1,
                encoder_ff_interm_features=256, encoder_ff_interm_dropout=0.0, encoder_dropout=0.1,
                encoder_layer_norm_first=False, encoder_layer_drop=0.05, aux_num_out=32)

        wave = lambda size, g: [torch.randn(1, 4000 if size == "small" else 16000, generator=g)]  # noqa: E731
        audio("wav2vec2", lambda s: w2v(s, False), wave)
        audio("wav2vec2_ln_first", lambda s: w2v(s, True), wave)
        audio("hubert", hubert, wave)

        def conformer(size):
            d, layers = (80, 2) if size == "small" else (80, 16)
            return M.Conformer(input_dim=d, num_heads=4, ffn_dim=128 if size == "small" else 1024, num_layers=layers,
                               depthwise_conv_kernel_size=31)

        def feats_and_lengths(size, g, right=0):
            t = 40 if size == "small" else 400
            return [torch.randn(2, t + right, 80, generator=g), torch.tensor([t, t * 3 // 4])]

        audio("conformer", conformer, feats_and_lengths)

        def emformer(size):
            return M.Emformer(input_dim=80, num_heads=4, ffn_dim=128 if size == "small" else 1024,
                              num_layers=2 if size == "small" else 20, segment_length=4, right_context_length=1)

        audio("emformer", emformer, lambda size, g: feats_and_lengths(size, g, right=1))

        def tasnet(size):
            if size == "full":
                return M.conv_tasnet_base(num_sources=2)
            return M.ConvTasNet(num_sources=2, enc_kernel_size=16, enc_num_feats=64, msk_kernel_size=3,
                                msk_num_feats=32, msk_num_hidden_feats=64, msk_num_layers=3, msk_num_stacks=2)

        audio("conv_tasnet", tasnet, lambda size, g: [torch.randn(1, 1, 4000 if size == "small" else 32000,
                                                                  generator=g)], quantize="static")

        def wavernn(size):
            if size == "full":
                return M.WaveRNN(upsample_scales=[5, 5, 8], n_classes=256, hop_length=200)
            return M.WaveRNN(upsample_scales=[5, 5, 8], n_classes=64, hop_length=200, n_res_block=2, n_rnn=64,
                             n_fc=64, kernel_size=5, n_freq=32, n_hidden=32, n_output=32)

        def wavernn_inputs(size, g):
            n_freq, t_spec = (32, 8) if size == "small" else (128, 20)
            return [torch.randn(1, 1, (t_spec - 5 + 1) * 200, generator=g), torch.randn(1, 1, n_freq, t_spec,
                                                                                       generator=g)]

        audio("wavernn", wavernn, wavernn_inputs)
        audio("wav2letter", lambda s: M.Wav2Letter(num_classes=40, input_type="mfcc", num_features=13),
              lambda size, g: [torch.randn(1, 13, 100 if size == "small" else 1000, generator=g)], quantize="static")
        audio("deepspeech", lambda s: M.DeepSpeech(n_feature=40, n_hidden=64 if s == "small" else 2048, n_class=40),
              lambda size, g: [torch.randn(1, 1, 50 if size == "small" else 500, 40, generator=g)])

        def rnnt(size):
            if size == "full":
                return M.emformer_rnnt_base(num_symbols=128)
            return M.emformer_rnnt_model(
                input_dim=20, encoding_dim=32, num_symbols=30, segment_length=4, right_context_length=1,
                time_reduction_input_dim=32, time_reduction_stride=2, transformer_num_heads=2, transformer_ffn_dim=64,
                transformer_num_layers=2, transformer_dropout=0.1, transformer_activation="gelu",
                transformer_left_context_length=10, transformer_max_memory_size=0,
                transformer_weight_init_scale_strategy="depthwise", transformer_tanh_on_mem=True,
                symbol_embedding_dim=32, num_lstm_layers=2, lstm_layer_norm=True, lstm_layer_norm_epsilon=1e-3,
                lstm_dropout=0.3)

        def rnnt_inputs(size, g):
            d = 20 if size == "small" else 80
            t = 33 if size == "small" else 161
            return [torch.randn(2, t, d, generator=g), torch.tensor([t, t - 8], dtype=torch.int32),
                    torch.randint(0, 30, (2, 5), generator=g, dtype=torch.int32),
                    torch.tensor([5, 3], dtype=torch.int32)]

        audio("emformer_rnnt", rnnt, rnnt_inputs)
        audio("mel_cnn", lambda s: MelCnn(ta, 40 if s == "small" else 64),
              lambda size, g: [torch.randn(1, 16000 if size == "small" else 48000, generator=g)], quantize="static")
        out.append(Entry("tacotron2", "speech", None, None,
                         note="not verifiable: its prenet's dropout is always on (training=True in eval too), so no two "
                              "runs of the original agree" if ta else why_not_ta))
    else:
        for name in ("wav2vec2", "wav2vec2_ln_first", "hubert", "conformer", "emformer", "conv_tasnet", "wavernn",
                     "wav2letter", "deepspeech", "emformer_rnnt", "mel_cnn", "tacotron2"):
            out.append(Entry(name, "speech", None, None, note=why_not_ta))

    out.append(Entry("transformer_encoder_padded", "text",
                     lambda s: PaddedTextEncoder(64 if s == "small" else 256, 2 if s == "small" else 6),
                     lambda size, g: _tokens_and_mask(size, g)))
    if roberta:
        def roberta_encoder(size):
            small = size == "small"
            conf = roberta.RobertaEncoderConf(vocab_size=1000, embedding_dim=64 if small else 768,
                                              ffn_dimension=128 if small else 3072, padding_idx=1,
                                              max_seq_len=514, num_attention_heads=4 if small else 12,
                                              num_encoder_layers=2 if small else 12, dropout=0.1)
            head = roberta.RobertaClassificationHead(num_classes=3, input_dim=conf.embedding_dim)
            return roberta.RobertaModel(conf, head)

        out.append(Entry("roberta_encoder", "text", roberta_encoder, lambda size, g: _tokens_and_mask(size, g, pad=1)))
    else:
        out.append(Entry("roberta_encoder", "text", None, None, note=why_not_roberta))
    return out
