"""Always computes head_dim as hidden_size // num_attention_heads, ignoring the config's own
`head_dim`: right for every shipped config (where the two agree), wrong for one where they differ."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'kv_bytes_per_token_counts_kv_heads': ['explicit_head_dim_wins']}


def kv_bytes_for_config(config, dtype_bytes=None):
    if "n_layer" in config:                                    # GPT-2
        n_layer, n_head, width = config["n_layer"], config["n_head"], config["n_embd"]
        n_kv = n_head
        head_dim = width // n_head
    else:
        n_layer, n_head = config["num_hidden_layers"], config["num_attention_heads"]
        n_kv = config.get("num_key_value_heads", n_head)
        head_dim = config["hidden_size"] // n_head       # BUG: the `head_dim` field is ignored
    if dtype_bytes is None:
        dtype_bytes = DTYPE_BYTES[config.get("dtype") or config.get("torch_dtype") or "float32"]
    return kv_bytes_per_token(n_layer, n_kv, head_dim, dtype_bytes)
