"""Reads the number type but not its width from DTYPE_BYTES: float32 is 4 bytes and every other type is
taken as 2 (right for float16 and bfloat16, wrong for float64 and float8_e4m3fn)."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'kv_bytes_per_token_counts_kv_heads': ['every_listed_number_type']}


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
        name = config.get("dtype") or config.get("torch_dtype") or "float32"
        dtype_bytes = 4 if name == "float32" else 2                    # BUG: half width for every other type
    return kv_bytes_per_token(n_layer, n_kv, head_dim, dtype_bytes)
