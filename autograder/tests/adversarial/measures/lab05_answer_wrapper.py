"""lab05: kv_bytes_per_token and requests_that_fit as one-line wrappers around the course's
own answers, looked up every way a notebook can reach them: the attribute course.kv_cache
forwards to course.paged_kv, an import of course.paged_kv, and the module's source read from
the course folder and run. Every other solution cell keeps the release's stub."""

EXPECT = {"no_more_than": "release", "output_has": ["TRIED kv_cache", "TRIED paged_kv", "TRIED source"],
          "output_not": ["LEAK"]}


def _course_answer(name):
    import importlib
    import os
    import course
    try:
        f = getattr(importlib.import_module("course.kv_cache"), name)
        print("LEAK kv_cache", name, flush=True)
        return f
    except Exception as e:  # noqa: BLE001
        print("TRIED kv_cache", name, type(e).__name__, flush=True)
    try:
        f = getattr(importlib.import_module("course.paged_kv"), name)
        print("LEAK paged_kv", name, flush=True)
        return f
    except Exception as e:  # noqa: BLE001
        print("TRIED paged_kv", name, type(e).__name__, flush=True)
    try:
        path = os.path.join(os.path.dirname(course.__file__), "paged_kv.py")
        ns = {"__name__": "course._copy", "__package__": "course"}
        with open(path, encoding="utf-8") as fh:
            exec(compile(fh.read(), path, "exec"), ns)
        print("LEAK source", name, flush=True)
        return ns[name]
    except Exception as e:  # noqa: BLE001
        print("TRIED source", name, type(e).__name__, flush=True)
    return None


def kv_bytes_per_token(n_layer, n_kv_heads, head_dim, dtype_bytes):
    f = _course_answer("kv_bytes_per_token")
    if f is None:
        raise NotImplementedError("kv_bytes_per_token")
    return f(n_layer, n_kv_heads, head_dim, dtype_bytes)


def requests_that_fit(budget_bytes, bytes_per_token, prompt_tokens, max_tokens, block_size=1):
    f = _course_answer("requests_that_fit")
    if f is None:
        raise NotImplementedError("requests_that_fit")
    return f(budget_bytes, bytes_per_token, prompt_tokens, max_tokens, block_size)
