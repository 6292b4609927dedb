"""Small models the GPU checks share (random weights, no downloads)."""
import torch


class Manual(torch.nn.Module):
    """A small decoder with a persistent KV cache (batch 1)."""

    def __init__(self, layers=3, d=1024, heads=8, ffn=2816, vocab=8192, max_len=256):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.layers = torch.nn.ModuleList()
        for _ in range(layers):
            blk = torch.nn.Module()
            blk.n1 = torch.nn.RMSNorm(d)
            blk.qkv = torch.nn.Linear(d, 3 * d, bias=False)
            blk.o = torch.nn.Linear(d, d, bias=False)
            blk.n2 = torch.nn.RMSNorm(d)
            blk.up = torch.nn.Linear(d, 2 * ffn, bias=False)
            blk.down = torch.nn.Linear(ffn, d, bias=False)
            self.layers.append(blk)
        self.norm = torch.nn.RMSNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)
        self.h, self.d = heads, d
        self.register_buffer("k", torch.zeros(layers, heads, max_len, d // heads))
        self.register_buffer("v", torch.zeros(layers, heads, max_len, d // heads))

    def forward(self, ids, pos):
        x = self.emb(ids)
        t = ids.shape[1]
        for i, b in enumerate(self.layers):
            q, k, v = b.qkv(b.n1(x)).view(1, t, 3, self.h, -1).unbind(2)
            self.k[i].index_copy_(1, pos, k[0].transpose(0, 1))
            self.v[i].index_copy_(1, pos, v[0].transpose(0, 1))
            a = torch.nn.functional.scaled_dot_product_attention(
                q.transpose(1, 2), self.k[i:i + 1], self.v[i:i + 1])
            x = x + b.o(a.transpose(1, 2).reshape(1, t, self.d))
            g, u = b.up(b.n2(x)).chunk(2, -1)
            x = x + b.down(torch.nn.functional.silu(g) * u)
        return self.head(self.norm(x))


def capture_graph(fn):
    """fn() captured as a CUDA graph after one warm-up call on a side stream,
    as PyTorch asks: (the graph, the output tensors it writes)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out
