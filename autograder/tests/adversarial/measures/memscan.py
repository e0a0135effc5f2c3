"""What a student's code can reach of the grading process's memory, and which of it would
be a judge, a test, the reference or the plugin (functions, code objects, modules).

`SOURCE` is pasted into a submission (it runs in the sandboxed child) and also run in the
grading process by the test, where the judges are loaded, to show that it finds them."""

SOURCE = r'''
def memscan(limit=1_000_000):
    """{"found": qualified names of forbidden functions/code, "modules": forbidden entries of
    sys.modules, "heap": "gc" or why gc.get_objects() was refused, "visited": objects walked}.
    Walks from sys.modules, every frame of the stack (globals, locals, callers), and gc's
    heap when allowed, through module and instance dicts, classes, containers, closures,
    defaults, bound methods and frames."""
    import re
    import sys
    import types
    bad = re.compile(r"autograder[./\\]graders[./\\]lab\d\d[./\\](test_\w+|judging|conftest)"
                     r"|autograder[./\\](reference|plugin)\b")
    import collections
    import warnings
    warnings.simplefilter("ignore")
    found, seen, todo = set(), set(), collections.deque()
    modules = sorted(n for n in list(sys.modules) if bad.search(n))
    try:
        import gc
        heap = [o for o in gc.get_objects() if type(o) is types.FunctionType]
    except Exception as e:
        heap = type(e).__name__
    else:
        found.update(f"{o.__module__}.{o.__qualname__}" for o in heap
                     if bad.search(o.__code__.co_filename) or bad.search(str(o.__module__)))
        heap = "gc"
    frame = sys._getframe()
    while frame is not None:
        todo.append(frame)
        frame = frame.f_back
    todo.extend(list(sys.modules.values()))
    visited = 0
    while todo and visited < limit:
        o = todo.popleft()
        if id(o) in seen:
            continue
        seen.add(id(o))
        visited += 1
        t = type(o)
        try:
            if t is types.FunctionType:
                if bad.search(o.__code__.co_filename) or bad.search(str(o.__module__)):
                    found.add(f"{o.__module__}.{o.__qualname__}")
                todo += [o.__globals__, o.__code__, *(o.__closure__ or ()), *(o.__defaults__ or ()),
                         *(o.__kwdefaults__ or {}).values(), *vars(o).values()]
            elif t is types.CodeType:
                if bad.search(o.co_filename):
                    found.add(f"{o.co_filename}:{o.co_name}")
                todo += [c for c in o.co_consts if type(c) is types.CodeType]
            elif t is types.FrameType:
                todo += [o.f_code, o.f_globals, dict(o.f_locals), o.f_back]
            elif t is types.ModuleType:
                todo += list(vars(o).values())
            elif t is types.MethodType:
                todo += [o.__func__, o.__self__]
            elif t is types.CellType:
                todo.append(o.cell_contents)
            elif t is dict or isinstance(o, dict):
                todo += list(o.keys()) + list(o.values())
            elif t in (list, tuple, set, frozenset) or isinstance(o, (list, tuple, set, frozenset)):
                todo += list(o)
            elif isinstance(o, type):
                todo += list(vars(o).values())
            elif t in (staticmethod, classmethod, property):
                todo += [getattr(o, a, None) for a in ("__func__", "fget", "fset", "fdel")]
            else:
                d = object.__getattribute__(o, "__dict__") if hasattr(t, "__dict__") else None
                if type(d) is dict:
                    todo.append(d)
                for s in getattr(t, "__slots__", ()) if isinstance(getattr(t, "__slots__", ()), tuple) else ():
                    try:
                        todo.append(object.__getattribute__(o, s))
                    except Exception:
                        pass
        except Exception:
            pass
    return {"found": sorted(found), "modules": modules, "heap": heap, "visited": visited}
'''
