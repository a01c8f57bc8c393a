"""ptrepack_fp8_gen.py OUTDIR SEED - checkpoints for ptrepack --dequant
and --quant, and what torch makes of them (tests/tools/ptrepack_fp8.sh;
torch 2.x: 1.13 has no float8).  Inputs (in OUTDIR/in):

  block.*       DeepSeek-V3 layout: X.weight float8 + X.weight_scale_inv
                float32 per 128x128 block; 300x200 (edge blocks partial)
                e4m3fn with NaN, +-inf-saturated codes and a zero block,
                scales with 0, NaN, inf and a negative one; 256x384 e5m2
                with NaN and inf codes; 100x70 (one partial block); plus
                tensors left alone: a bf16 linear, a norm, embed_tokens,
                lm_head; as block.pt, block.safetensors, an HF folder
                block_hf/ (2 shards, a pair split across them, config.json
                with quantization_config) and a DCP directory block_dcp/
  ct.*          compressed-tensors: per-tensor weight_scale (shape () and
                (1,)) with input_scale, per-channel (rows, 1) and (rows,)
  plain.*       floating weights for --quant: float32 300x200 (zero block,
                NaN, inf, tiny values), bfloat16 256x384, float16 64x64,
                and what the reference leaves alone (embed_tokens, norms,
                lm_head, a MoE router's gate, a 1-d bias); as plain.pt,
                plain.safetensors, plain_hf/ and plain_dcp/
  bad_*.safetensors  one fault each, for refusals; bad_tie.pt: two
                names of one float8 storage, each with a scale, and of
                one float32 one

Expected results (OUTDIR/want), computed here in torch on CPU:
  dequant_block_{bf16,fp16,fp32}.pt, dequant_ct_bf16.pt: the block loops
  in float32 (w.float() * scale over each block), then .to(dtype);
  quant_plain_{128,64}.pt: DeepSeek-V3's weight_quant per block (amax,
  clamp at 1e-4 as DeepGEMM does, s = amax / 448, y = x / s to e4m3fn);
  roundtrip.pt: quant_plain_128 dequantized again to bfloat16;
  nan_both.pt: where weight and scale are both NaN (any NaN will do
  there: torch's own payload depends on the element's lane in its loop).
"""
import json
import math
import os
import sys

import torch
from safetensors.torch import save_file

out, seed = sys.argv[1], int(sys.argv[2])
torch.manual_seed(seed)
IN, WANT = os.path.join(out, 'in'), os.path.join(out, 'want')
os.makedirs(IN, exist_ok=True)
os.makedirs(WANT, exist_ok=True)
E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2


def codes(shape, dtype, specials=()):
    """Random float8 codes of every value (NaN included), as @dtype."""
    w = torch.randint(0, 256, shape, dtype=torch.uint8)
    for (i, j), v in specials:
        w[i, j] = v
    return w.view(dtype)


def dequant_blocks(w, s, b):
    r, c = w.shape
    y = torch.empty(r, c, dtype=torch.float32)
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            rs, cs = slice(i * b, (i + 1) * b), slice(j * b, (j + 1) * b)
            y[rs, cs] = w[rs, cs].float() * s[i, j]
    return y


def weight_quant(x, b):
    x = x.float()
    r, c = x.shape
    y = torch.empty(r, c, dtype=E4)
    s = torch.empty(math.ceil(r / b), math.ceil(c / b), dtype=torch.float32)
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            rs, cs = slice(i * b, (i + 1) * b), slice(j * b, (j + 1) * b)
            blk = x[rs, cs]
            amax = blk.abs().amax().clamp(min=1e-4)
            sc = amax / 448.0
            y[rs, cs] = (blk / sc).to(E4)
            s[i, j] = sc
    return y, s


def save_all(name, sd, config=None, split=None):
    """@sd as NAME.pt, NAME.safetensors, NAME_hf/ and NAME_dcp/."""
    import torch.distributed.checkpoint as dcp
    torch.save(sd, os.path.join(IN, name + '.pt'))
    save_file(sd, os.path.join(IN, name + '.safetensors'),
              metadata={'format': 'pt'})
    hf = os.path.join(IN, name + '_hf')
    os.makedirs(hf, exist_ok=True)
    keys = list(sd)
    parts = [keys[:split], keys[split:]]
    wm = {}
    for k, part in enumerate(parts):
        f = 'model-%05d-of-00002.safetensors' % (k + 1)
        save_file({n: sd[n] for n in part}, os.path.join(hf, f),
                  metadata={'format': 'pt'})
        wm.update({n: f for n in part})
    total = sum(t.numel() * t.element_size() for t in sd.values())
    with open(os.path.join(hf, 'model.safetensors.index.json'), 'w') as f:
        json.dump({'metadata': {'total_size': total}, 'weight_map': wm}, f,
                  indent=2)
    with open(os.path.join(hf, 'config.json'), 'w') as f:
        json.dump(config, f, indent=2)
    dcp.save(sd, checkpoint_id=os.path.join(IN, name + '_dcp'))


# ---- block-scaled float8 (DeepSeek-V3) ----
nan_e4, nan_e5 = 0x7f, 0x7f
wq = codes((300, 200), E4, [((0, 0), nan_e4), ((1, 1), 0xff),
                            ((2, 2), 0x7e), ((3, 3), 0xfe)])
wq.view(torch.uint8)[128:256, 128:200] = 0          # a zero block
sq = torch.rand(3, 2) * 1e-2
sq[0, 1] = 0.0                                      # scale 0: NaN * 0 too
sq[1, 0] = float('nan')
sq[2, 0] = float('inf')
sq[2, 1] = -3.5e-3
wk = codes((256, 384), E5, [((0, 0), 0x7c), ((0, 1), 0xfc), ((5, 5), 0x7e),
                            ((6, 6), 0xff)])
sk = torch.rand(2, 3) * 1e-1
wv = codes((100, 70), E4)
sv = torch.rand(1, 1)
block = {
    'model.embed_tokens.weight': torch.randn(64, 200).to(torch.bfloat16),
    'model.layers.0.self_attn.q_proj.weight': wq,
    'model.layers.0.self_attn.q_proj.weight_scale_inv': sq,
    'model.layers.0.self_attn.k_proj.weight': wk,
    'model.layers.0.self_attn.k_proj.weight_scale_inv': sk,
    'model.layers.0.self_attn.o_proj.weight': torch.randn(200, 64).to(
        torch.bfloat16),
    'model.layers.0.input_layernorm.weight': torch.randn(200).to(
        torch.bfloat16),
    'model.layers.0.mlp.v.weight': wv,
    'model.layers.0.mlp.v.weight_scale_inv': sv,
    'lm_head.weight': torch.randn(64, 200).to(torch.bfloat16),
}
qcfg = {'architectures': ['DeepseekV3ForCausalLM'], 'hidden_size': 200,
        'quantization_config': {'activation_scheme': 'dynamic',
                                'fmt': 'e4m3', 'quant_method': 'fp8',
                                'weight_block_size': [128, 128]},
        'torch_dtype': 'bfloat16', 'vocab_size': 64}
# the q_proj pair lands in two shards
save_all('block', block, qcfg, split=3)
with open(os.path.join(WANT, 'config_block.json'), 'w') as f:
    json.dump({k: v for k, v in qcfg.items() if k != 'quantization_config'},
              f, indent=2)

pairs = [('model.layers.0.self_attn.q_proj.', 128),
         ('model.layers.0.self_attn.k_proj.', 128),
         ('model.layers.0.mlp.v.', 128)]
for tag, dt in (('bf16', torch.bfloat16), ('fp16', torch.float16),
                ('fp32', torch.float32)):
    want, both = {}, {}
    for k, v in block.items():
        if k.endswith('_scale_inv'):
            continue
        p = k[:-len('weight')]
        if p + 'weight_scale_inv' in block:
            s = block[p + 'weight_scale_inv']
            se = s.repeat_interleave(128, 0)[:v.shape[0]]
            both[k] = v.float().isnan() & se.repeat_interleave(
                128, 1)[:, :v.shape[1]].isnan()
            v = dequant_blocks(v, s, 128).to(dt)
        want[k] = v
    torch.save(want, os.path.join(WANT, 'dequant_block_%s.pt' % tag))
# where weight and scale are both NaN, torch's NaN is the one or the
# other by the lane of its vectorized loop: the check asks for a NaN
torch.save(both, os.path.join(WANT, 'nan_both.pt'))

# ---- compressed-tensors: per tensor and per channel ----
ct = {
    'a.weight': codes((64, 48), E4, [((0, 0), nan_e4)]),
    'a.weight_scale': torch.tensor(0.0123),
    'a.input_scale': torch.tensor([0.5]),
    'b.weight': codes((32, 16), E4),
    'b.weight_scale': torch.rand(32, 1),
    'c.weight': codes((16, 8), E5),
    'c.weight_scale': torch.rand(16),
    'c.input_scale': torch.tensor(0.25),
    'd.weight': codes((8, 8), E4),
    'd.weight_scale': torch.tensor([2.0]),
    'e.bias': torch.randn(16),
}
ct['b.weight_scale'][3, 0] = float('nan')
torch.save(ct, os.path.join(IN, 'ct.pt'))
save_file(ct, os.path.join(IN, 'ct.safetensors'))
want = {'a.weight': (ct['a.weight'].float() * ct['a.weight_scale']),
        'b.weight': (ct['b.weight'].float() * ct['b.weight_scale']),
        'c.weight': (ct['c.weight'].float() *
                     ct['c.weight_scale'].reshape(-1, 1)),
        'd.weight': (ct['d.weight'].float() * ct['d.weight_scale']),
        'e.bias': ct['e.bias']}
want = {k: v.to(torch.bfloat16) if k != 'e.bias' else v
        for k, v in want.items()}
torch.save(want, os.path.join(WANT, 'dequant_ct_bf16.pt'))

# ---- plain weights for --quant ----
x = torch.randn(300, 200) * 0.05
x[0:128, 128:200] = 0.0                           # a zero block
x[128:256, 0:128] *= 1e-6                          # below the clamp
x[200, 5] = float('nan')
x[260, 150] = float('inf')
x[270, 10] = -float('inf')
plain = {
    'model.embed_tokens.weight': torch.randn(64, 200).to(torch.bfloat16),
    'model.layers.0.self_attn.q_proj.weight': x,
    'model.layers.0.self_attn.q_proj.bias': torch.randn(300),
    'model.layers.0.mlp.up_proj.weight': torch.randn(256, 384).to(
        torch.bfloat16),
    'model.layers.0.mlp.gate.weight': torch.randn(8, 384).to(torch.bfloat16),
    'model.layers.0.mlp.down.weight': (torch.randn(64, 64) * 30).half(),
    'model.layers.0.post_attention_layernorm.weight': torch.randn(200),
    'model.norm.weight': torch.randn(200),
    'lm_head.weight': torch.randn(64, 200).to(torch.bfloat16),
}
save_all('plain', plain, {'architectures': ['X'], 'hidden_size': 200},
         split=4)
quantized = ('model.layers.0.self_attn.q_proj.weight',
             'model.layers.0.mlp.up_proj.weight',
             'model.layers.0.mlp.down.weight')
for b in (128, 64):
    want = {}
    for k, v in plain.items():
        if k in quantized:
            want[k], want[k + '_scale_inv'] = weight_quant(v, b)
        else:
            want[k] = v
    torch.save(want, os.path.join(WANT, 'quant_plain_%d.pt' % b))
    if b == 128:
        rt = {k: (dequant_blocks(v, want[k + '_scale_inv'], 128).to(
                  torch.bfloat16) if k in quantized else v)
              for k, v in want.items() if not k.endswith('_scale_inv')}
        torch.save(rt, os.path.join(WANT, 'roundtrip.pt'))

# ---- one fault each ----
good = {k: block[k] for k in ('model.layers.0.mlp.v.weight',
                              'model.layers.0.mlp.v.weight_scale_inv')}
bad = {
    'shape': dict(good, **{'model.layers.0.mlp.v.weight_scale_inv':
                           torch.rand(2, 1)}),
    'dtype': dict(good, **{'model.layers.0.mlp.v.weight_scale_inv':
                           torch.rand(1, 1).to(torch.bfloat16)}),
    'weight': dict(good, **{'model.layers.0.mlp.v.weight':
                            torch.randn(100, 70).to(torch.bfloat16)}),
    'alone': {'x.weight_scale_inv': torch.rand(1, 1)},
    'ctshape': {'a.weight': codes((8, 4), E4),
                'a.weight_scale': torch.rand(4)},
}
for k, sd in bad.items():
    save_file(sd, os.path.join(IN, 'bad_%s.safetensors' % k))
# two names of one storage (torch.save keeps the tie; safetensors cannot)
tw, tx = codes((100, 70), E4), torch.randn(100, 70)
torch.save({'a.weight': tw, 'b.weight': tw, 'a.weight_scale_inv':
            torch.rand(1, 1), 'b.weight_scale_inv': torch.rand(1, 1),
            'x.weight': tx, 'y.weight': tx},
           os.path.join(IN, 'bad_tie.pt'))
print('generated under torch', torch.__version__)
