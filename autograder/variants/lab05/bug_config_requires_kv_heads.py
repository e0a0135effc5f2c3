"""Reads num_key_value_heads unconditionally for Llama-style names: every shipped config has it,
but an MHA model written with those names (no num_key_value_heads) raises KeyError."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'kv_bytes_per_token_counts_kv_heads': ['llama_names_without_kv_heads_are_mha']}


def kv_bytes_for_config(config, dtype_bytes=None):
    if "n_layer" in config:                                    # GPT-2
        n_layer, n_head, width = config["n_layer"], config["n_head"], config["n_embd"]
        n_kv = n_head
        head_dim = width // n_head
    else:
        n_layer, n_head = config["num_hidden_layers"], config["num_attention_heads"]
        n_kv = config["num_key_value_heads"]             # BUG: no fallback to the attention heads (MHA)
        head_dim = config.get("head_dim", config["hidden_size"] // n_head)
    if dtype_bytes is None:
        dtype_bytes = DTYPE_BYTES[config.get("dtype") or config.get("torch_dtype") or "float32"]
    return kv_bytes_per_token(n_layer, n_kv, head_dim, dtype_bytes)
