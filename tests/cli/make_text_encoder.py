"""A text encoder as users write one (issue 37): token embedding, an
nn.TransformerEncoder with enable_nested_tensor=True run with a
src_key_padding_mask (under no-grad its fast path turns the padded batch into
a nested tensor), a linear head; random weights. Writes te_script.pt,
te_trace.pt and te_inputs.pt (the tokens and mask, torch.save'd) into DIR.
Usage: make_text_encoder.py DIR
"""
import sys
import warnings

warnings.filterwarnings("ignore")  # torch.jit's deprecation, nested tensors' prototype warning
import torch  # noqa: E402


class TextEncoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(100, 32)
        layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=True)
        self.head = torch.nn.Linear(32, 5)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor):
        h = self.enc(self.emb(tokens), src_key_padding_mask=mask)
        return self.head(h.mean(1))


torch.manual_seed(0)
m = TextEncoder().eval()
tokens = torch.randint(0, 100, (2, 7))
mask = torch.zeros(2, 7, dtype=torch.bool)
mask[1, 4:] = True  # the second sequence is 4 tokens long
out = sys.argv[1]
torch.jit.script(m).save(out + "/te_script.pt")
with torch.no_grad():
    torch.jit.trace(m, (tokens, mask)).save(out + "/te_trace.pt")
torch.save((tokens, mask), out + "/te_inputs.pt")
