"""When the batched forward raises, every request in the batch ends with `error`, not only the
one that caused it."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'every_ending_frees_its_blocks': ['model_error_ends_only_its_request']}


def run_batch(engine, batch):
    try:
        logits = engine.model.forward_batch([r.ids for r in batch], [r.cache for r in batch])
        return [logits[i] for i in range(len(batch))]
    except Exception as error:
        return [error] * len(batch)   # BUG: one request's error ends them all
    items = []
    for req in batch:
        req.cache.release()
        req.cache.reserve(len(req.ids))
        try:
            items.append(engine.model.forward_batch([req.ids], [req.cache])[0])
        except Exception as e:
            items.append(e)
    return items
