"""Reads num_attention_heads where the cache needs num_key_value_heads: right for GPT-2 (MHA), 4x to
7x too large for the GQA models."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'kv_bytes_per_token_counts_kv_heads': [
    'gqa_configs_count_kv_heads', 'dtype_bytes_overrides_torch_dtype', 'reads_dtype_of_current_transformers',
    'explicit_head_dim_wins', 'no_number_type_means_float32']}


def kv_bytes_for_config(config, dtype_bytes=None):
    if "n_layer" in config:                                    # GPT-2
        n_layer, n_head, width = config["n_layer"], config["n_head"], config["n_embd"]
        n_kv = n_head
        head_dim = width // n_head
    else:
        n_layer, n_head = config["num_hidden_layers"], config["num_attention_heads"]
        n_kv = n_head                               # BUG: not num_key_value_heads
        head_dim = config.get("head_dim", config["hidden_size"] // n_head)
    if dtype_bytes is None:
        dtype_bytes = DTYPE_BYTES[config.get("dtype") or config.get("torch_dtype") or "float32"]
    return kv_bytes_per_token(n_layer, n_kv, head_dim, dtype_bytes)
