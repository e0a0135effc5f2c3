"""Falls back from `dtype` to `torch_dtype` but not to float32: a config with neither raises KeyError."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'kv_bytes_per_token_counts_kv_heads': ['no_number_type_means_float32']}


def kv_bytes_for_config(config, dtype_bytes=None):
    if "n_layer" in config:                                    # GPT-2
        n_layer, n_head, width = config["n_layer"], config["n_head"], config["n_embd"]
        n_kv = n_head
        head_dim = width // n_head
    else:
        n_layer, n_head = config["num_hidden_layers"], config["num_attention_heads"]
        n_kv = config.get("num_key_value_heads", n_head)
        head_dim = config.get("head_dim", config["hidden_size"] // n_head)
    if dtype_bytes is None:
        dtype_bytes = DTYPE_BYTES[config.get("dtype") or config["torch_dtype"]]   # BUG: no float32 default
    return kv_bytes_per_token(n_layer, n_kv, head_dim, dtype_bytes)
