"""The course's own claims agree: times (syllabus = README = workshop plan) and glossary terms."""
import re

from course import docs
from notebooks import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
WORKSHOP = (ROOT / "course" / "WORKSHOP.md").read_text(encoding="utf-8")


def test_every_finished_lab_states_its_times_in_the_syllabus():
    times = docs.lab_times()
    for lab in ("lab00", "lab01", "lab02", "lab03", "lab04"):
        assert lab in times, f"course/syllabus/{lab}.md needs `**Time:** about N minutes to solve alone`"
        assert times[lab]["alone"] >= times[lab]["workshop"] if times[lab]["workshop"] else True


def test_readme_labs_table_quotes_the_syllabus_times():
    times = docs.lab_times()
    rows = {m["lab"]: m["row"] for m in re.finditer(r"^\| \[(?P<lab>lab\d\d)\]\(labs/lab\d\d\) \|(?P<row>.*)$",
                                                     README, re.M)}
    for lab, t in times.items():
        assert lab in rows, f"README labs table has no row for {lab}"
        cells = [c.strip() for c in rows[lab].strip(" |").split("|")]
        assert cells[-1] == f"~{t['alone']} min", \
            f"README: {lab} time {cells[-1]!r}, the syllabus says about {t['alone']} minutes"


def test_readme_workshop_sentence_quotes_the_syllabus_times():
    t = docs.lab_times()
    solo = f"{t['lab00']['alone']} + {t['lab01']['alone']} + {t['lab02']['alone']} minutes"
    flat = " ".join(README.split())
    assert f"about {solo}" in flat, f"README's workshop paragraph must say 'about {solo}'"
    assert f"lab01 and lab02 ({t['lab01']['workshop']} minutes each" in flat
    assert t["lab01"]["workshop"] == t["lab02"]["workshop"]
    assert f"lab03 ({t['lab03']['workshop']} minutes)" in flat


def _minutes(clock):
    h, m = clock.split(":")
    return 60 * int(h) + int(m)


def test_workshop_plan_adds_up_and_quotes_the_syllabus():
    times = docs.lab_times()
    rows = re.findall(r"^\| (\d+:\d\d) \| ([^|]*?) \((\d+) min\) \|", WORKSHOP, re.M)
    assert len(rows) >= 5, "the workshop table lost its rows"
    for (start, block, minutes), (next_start, _, _) in zip(rows, rows[1:]):
        assert _minutes(start) + int(minutes) == _minutes(next_start), \
            f"WORKSHOP.md: {block} starts at {start} and lasts {minutes} min, but the next block starts at {next_start}"
        lab = re.match(r"(lab\d\d)", block)
        if lab:
            assert int(minutes) == times[lab[1]]["workshop"], \
                f"WORKSHOP.md gives {lab[1]} {minutes} min, the syllabus {times[lab[1]]['workshop']}"
    total = _minutes(rows[-1][0])
    assert f"({total // 60} h {total % 60} min" in WORKSHOP.splitlines()[0]
    assert f"({total // 60} h {total % 60} min)" in " ".join(README.split())
    alone = f"{times['lab00']['alone']} + {times['lab01']['alone']} + {times['lab02']['alone']} minutes"
    assert alone in " ".join(WORKSHOP.split())
    assert f"workshop variant (60 min: " in WORKSHOP and times["lab03"]["workshop"] == 60


# Terms the course promises, with the Chinese form classrooms use.
REQUIRED_TERMS = {
    "logit": "Logit（未归一化分数）", "holdback": "暂扣", "crossing token": "跨阈值词元",
    "schema validation": "Schema 校验", "stop string": "stop 序列",
    "time to first token (TTFT)": "首 Token 时延", "time per output token (TPOT)": "每输出 Token 时延",
    "token": "Token", "span": "Span", "trace": "Trace", "P95 / P99": "P95/P99", "tokens/s": "tokens/s",
    "continuous batching": "连续批处理", "prefix reuse (prefix caching)": "前缀复用", "quantization": "量化",
    "rate limiting": "限流", "load shedding": "过载拒绝", "cancellation propagation": "取消传播",
    "first deviation": "首个偏差", "memory pressure": "显存压力", "KV bytes per token": "KV",
    "streaming": "流式输出",
}
BANNED_ZH = ["对数几率", "回扣", "越界词元", "首词元时延", "每输出词元时间"]


def test_glossary_has_the_required_terms_with_their_chinese_forms():
    rows = {term.lower(): (zh, lab) for term, zh, _, lab in docs.glossary_rows()}
    for term, zh in REQUIRED_TERMS.items():
        assert term.lower() in rows, f"glossary lacks {term!r}"
        assert zh in rows[term.lower()][0], f"glossary: {term!r} should read {zh!r}, got {rows[term.lower()][0]!r}"
    assert rows["streaming"][1] == "lab03", "streaming is first met in lab03"
    for zh in BANNED_ZH:
        assert all(zh not in z for z, _ in rows.values()), f"glossary still uses {zh!r}, which means something else"


def test_no_term_is_defined_twice():
    seen = {}
    for path in sorted((ROOT / "course" / "glossary").glob("lab0[0-4].md")):
        for line in path.read_text(encoding="utf-8").splitlines():
            m = docs.ROW.match(line)
            if not m or m["term"] == "term" or set(m["term"]) <= set("-: "):
                continue
            key = m["term"].lower()
            assert key not in seen, f"{m['term']!r} is defined in {seen.get(key)} and {path.stem}"
            seen[key] = path.stem
