"""as_gen.py - the sources of tests/fs/formats/as.sh (torch 2.x with
transformers, in its root).

  as_gen.py OUT

A tiny LlamaForCausalLM (hidden 64, 2 layers, 4 heads, 2 key/value heads,
vocabulary 256, untied lm_head; seeded), and the same weights three ways:

  OUT/dcp/      torch.distributed.checkpoint.save of its state dict, with
                config.json and generation_config.json beside .metadata
                (model.config.save_pretrained), as a training job keeps
  OUT/hf/       save_pretrained(max_shard_size="200KB"): a sharded folder
                (3 shards, an index, config.json, generation_config.json)
  OUT/sd.pt     torch.save of the state dict plus {"train": {"step": 3}},
                a python value a safetensors file cannot hold
  OUT/ids.pt    fixed input ids (1 x 12)
  OUT/logits.pt the model's logits on them (float32, eval mode)

Prints "ok<TAB>summary"; a problem is one line on stderr and exit 1.
"""
import os
import sys

import torch


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)


def gen(out):
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
        import transformers
    except ImportError as e:
        fail("no transformers in this torch's root: %s" % e)
    import torch.distributed.checkpoint as dcp

    torch.manual_seed(43)
    cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                      num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=64,
                      tie_word_embeddings=False)
    m = LlamaForCausalLM(cfg).eval()
    # LlamaForCausalLM's init leaves norms at 1: make every tensor count
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    sd = m.state_dict()
    os.makedirs(out, exist_ok=True)
    d = os.path.join(out, "dcp")
    dcp.save(sd, storage_writer=dcp.FileSystemWriter(d))
    m.config.save_pretrained(d)
    m.generation_config.save_pretrained(d)
    m.save_pretrained(os.path.join(out, "hf"), max_shard_size="200KB")
    pt = dict(sd)
    pt["train"] = {"step": 3}
    torch.save(pt, os.path.join(out, "sd.pt"))
    ids = torch.tensor([[1, 17, 42, 99, 3, 250, 8, 64, 128, 5, 77, 200]])
    with torch.no_grad():
        logits = m(input_ids=ids).logits
    torch.save(ids, os.path.join(out, "ids.pt"))
    torch.save(logits, os.path.join(out, "logits.pt"))
    shards = [f for f in os.listdir(os.path.join(out, "hf"))
              if f.endswith(".safetensors")]
    if len(shards) < 2:
        fail("save_pretrained wrote %d shard(s), not 2 or more" % len(shards))
    print("ok\t%d tensors: a DCP directory with its config, %d HF shards, "
          "a .pt with a value; transformers %s, torch %s"
          % (len(sd), len(shards), transformers.__version__,
             torch.__version__))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        fail("usage: as_gen.py OUT")
    gen(sys.argv[1])
