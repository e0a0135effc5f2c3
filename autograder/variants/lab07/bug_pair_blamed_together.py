"""run_batch treats a failed batch of two like a batch of one: both requests get the error,
the innocent one included."""

BASE = "solution"   # every cell as in the solution notebook, but for what follows

EXPECT_FAIL = {'every_ending_frees_its_blocks': ['model_error_in_a_batch_of_two']}


def run_batch(engine, batch):
    try:
        logits = engine.model.forward_batch([r.ids for r in batch], [r.cache for r in batch])
        return [logits[i] for i in range(len(batch))]
    except Exception as error:
        if len(batch) <= 2:                 # BUG: a pair cannot tell who broke it, so both fail
            return [error] * len(batch)
    items = []
    for req in batch:
        req.cache.release()
        req.cache.reserve(len(req.ids))
        try:
            items.append(engine.model.forward_batch([req.ids], [req.cache])[0])
        except Exception as e:
            items.append(e)
    return items
