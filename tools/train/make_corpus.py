#!/usr/bin/env python3
"""Corpus and held-out set for TwinSpark's embedded default model (tools/train/README.md).

Plain python3, no third-party packages. Every example is a chat in OpenAI form plus the assistant's reply
split into reasoning / content / tool calls, so it can be rendered with our GLM-5.x chat template
(`render_prompt` below is the Python statement of tools/train/chat_template.jinja) and scored exactly.

    python3 tools/train/make_corpus.py --heldout tests/e2e/data/heldout.jsonl   # write the held-out set
    python3 tools/train/make_corpus.py --stats                                   # sizes, samples, checks
    python3 tools/train/make_corpus.py --check-template                          # jinja2 == render_prompt

Everything is a pure function of SEED. The held-out prompts are generated first, and no training
example has the same rendered prompt.
"""
import argparse, json, random, re, sys
from pathlib import Path

SEED = 20260701
N_HELDOUT_PER_FAMILY = 20
EOS_TURN, EOS_TOOL = "<|user|>", "<|observation|>"  # what ends a reply / a tool-calling turn (GLM)

# ---------------------------------------------------------------------------------------------------------
# Chat template (Python statement of chat_template.jinja; --check-template compares the two with jinja2)

TOOL_HEADER = ("<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
               "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n")
TOOL_FOOTER = ("</tools>\n\nFor each function call, output the function name and arguments within the following "
               "XML format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}"
               "</arg_value>...</tool_call>")


def tojson(v):  # HF's tojson filter: json.dumps, default separators, no key sorting
    return json.dumps(v, ensure_ascii=False)


def render_tool_call(tc):
    f = tc.get("function", tc)
    args = f.get("arguments") or {}
    if isinstance(args, str):
        args = json.loads(args)
    s = "<tool_call>" + f["name"]
    for k, v in args.items():
        s += "<arg_key>" + k + "</arg_key><arg_value>" + (v if isinstance(v, str) else tojson(v)) + "</arg_value>"
    return s + "</tool_call>"


def render_prompt(messages, tools=None, add_generation_prompt=True, enable_thinking=True):
    out = "[gMASK]<sop>"
    if tools:
        out += TOOL_HEADER + "".join(tojson(t.get("function", t)) + "\n" for t in tools) + TOOL_FOOTER
    prev = None
    for m in messages:
        role, content = m["role"], m.get("content") or ""
        if role == "system":
            out += "<|system|>" + content
        elif role == "user":
            out += "<|user|>" + content
        elif role == "assistant":
            reasoning = m.get("reasoning_content")
            if not isinstance(reasoning, str) and "</think>" in content:
                reasoning = content.split("</think>")[0].split("<think>")[-1]
                content = content.split("</think>")[-1]
            out += "<|assistant|><think>" + (reasoning if isinstance(reasoning, str) else "") + "</think>"
            out += content.strip()
            for tc in m.get("tool_calls") or []:
                out += render_tool_call(tc)
        elif role == "tool":
            if prev != "tool":
                out += "<|observation|>"
            out += "<tool_response>" + content + "</tool_response>"
        prev = role
    if add_generation_prompt:
        out += "<|assistant|>" + ("<think>" if enable_thinking else "<think></think>")
    return out


def completion_text(ex):
    """What the model must generate after the prompt (ends with the turn's stop token)."""
    s = (ex["reasoning"] + "</think>") if ex["enable_thinking"] else ""
    s += ex["content"]
    for tc in ex.get("tool_calls") or []:
        s += render_tool_call(tc)
    return s + (EOS_TOOL if ex.get("tool_calls") else EOS_TURN)


# ---------------------------------------------------------------------------------------------------------
# Scoring (the C++ test does the same with ts::ReasoningParser and ts::ToolCallParser)

TC_RE = re.compile(r"<tool_call>(.*?)(<arg_key>.*?)?</tool_call>", re.S)
ARG_RE = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.S)


def parse_output(text, starts_in_reasoning):
    """text: the decoded completion (special tokens skipped). Returns (reasoning, content, tool_calls)."""
    reasoning, content = "", text
    if starts_in_reasoning:
        if "</think>" in text:
            reasoning, content = text.split("</think>", 1)
        else:
            reasoning, content = text, ""
    calls = []
    for m in TC_RE.finditer(content):
        args = {}
        for k, v in ARG_RE.findall(m.group(2) or ""):
            args[k.strip()] = v  # every parameter of our tools is a "string": the raw text
        calls.append({"name": m.group(1).strip(), "arguments": args})
    content = TC_RE.sub("", content)
    return reasoning, content.strip(), calls


def is_correct(item, reasoning, content, calls):
    exp = item["expected"]
    if item["enable_thinking"] and not reasoning.strip():
        return False
    return content == exp["content"] and calls == exp["tool_calls"]


# ---------------------------------------------------------------------------------------------------------
# Task families. Each generator returns one example dict:
#   messages (prompt), tools, enable_thinking, reasoning, content, tool_calls

WORDS = ("cat dog fox owl bee ant cow pig hen elk yak emu apple pear plum fig lime kiwi mango grape lemon peach "
         "red blue green pink gray gold black white one two sun moon star rain snow wind tree leaf rock sand "
         "book pen cup box key map car bus ship train bike road lamp door desk").split()
NAMES = "Alice Bob Carol Dilnoza Eve Farrukh Grace Hana Ivan Jamshid Kate Li Malika Nodir Olga Pavel Rustam Sara".split()
CITIES = ("Paris London Tokyo Tashkent Berlin Madrid Rome Beijing Shanghai Samarkand Bukhara Seoul Cairo Lima "
          "Oslo Vienna Prague Warsaw Dubai Delhi Sydney Toronto Boston Chicago Denver Lisbon Dublin Athens "
          "Istanbul Nairobi").split()
CONDITIONS = ["sunny", "cloudy", "rainy", "windy", "snowy", "foggy", "clear"]
LANGS = ["English", "Uzbek", "Chinese", "French", "Spanish", "German"]

TOOLS = {
    "get_weather": {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}},
                       "required": ["city"]}}},
    "get_time": {"type": "function", "function": {
        "name": "get_time", "description": "Get the current local time in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}},
                       "required": ["city"]}}},
}

PREFIX = ["", "", "Quick question: ", "Please answer: ", "Hi! ", "Hello. ", "I need help. ", "Tell me: "]


def ex(q, reasoning, content, thinking=True, tools=None, tool_calls=None, history=None, family=""):
    msgs = (history or []) + ([{"role": "user", "content": q}] if q is not None else [])
    return {"family": family, "messages": msgs, "tools": tools, "enable_thinking": thinking,
            "reasoning": reasoning, "content": content, "tool_calls": tool_calls or []}


def digits_of(n, width):
    return [(n // 10 ** i) % 10 for i in range(width)]


PLACE = ["ones", "tens", "hundreds", "thousands", "ten-thousands"]


def add_reasoning(a, b):
    w = max(len(str(a)), len(str(b)))
    da, db, carry, lines = digits_of(a, w), digits_of(b, w), 0, []
    for i in range(w):
        s = da[i] + db[i] + carry
        lines.append(f"{PLACE[i]}: {da[i]} + {db[i]} + {carry} = {s}, write {s % 10}, carry {s // 10}")
        carry = s // 10
    if carry:
        lines.append(f"{PLACE[w]}: write {carry}")
    return f"Add {a} and {b} column by column.\n" + "\n".join(lines) + f"\nAnswer: {a + b}"


def sub_reasoning(a, b):
    w = len(str(a))
    da, db, borrow, lines = digits_of(a, w), digits_of(b, w), 0, []
    for i in range(w):
        r = da[i] - db[i] - borrow
        if r < 0:
            lines.append(f"{PLACE[i]}: {da[i]} + 10 - {db[i]} - {borrow} = {r + 10}, borrow 1")
            borrow = 1
        else:
            lines.append(f"{PLACE[i]}: {da[i]} - {db[i]} - {borrow} = {r}, borrow 0")
            borrow = 0
    return f"Subtract {b} from {a} column by column.\n" + "\n".join(lines) + f"\nAnswer: {a - b}"


def mul_reasoning(a, b):
    w = len(str(a))
    da, carry, lines = digits_of(a, w), 0, []
    for i in range(w):
        s = da[i] * b + carry
        lines.append(f"{PLACE[i]}: {da[i]} × {b} + {carry} = {s}, write {s % 10}, carry {s // 10}")
        carry = s // 10
    if carry:
        lines.append(f"{PLACE[w]}: write {carry}")
    return f"Multiply {a} by {b} column by column.\n" + "\n".join(lines) + f"\nAnswer: {a * b}"


def g_arith(r, thinking=True):
    kind = r.choice(["add", "add", "sub", "mul"])
    if kind == "add":
        a, b = r.randint(10, 10 ** r.randint(2, 4) - 1), r.randint(10, 10 ** r.randint(2, 3) - 1)
        q = r.choice(["What is {a} + {b}?", "Compute {a} + {b}.", "Add {a} and {b}.", "{a} + {b} = ?",
                      "What is the sum of {a} and {b}?"])
        rs, c = add_reasoning(a, b), f"{a} + {b} = {a + b}"
    elif kind == "sub":
        a, b = sorted([r.randint(10, 10 ** r.randint(2, 4) - 1), r.randint(10, 999)], reverse=True)
        q = r.choice(["What is {a} - {b}?", "Compute {a} - {b}.", "Subtract {b} from {a}.", "{a} - {b} = ?"])
        rs, c = sub_reasoning(a, b), f"{a} - {b} = {a - b}"
    else:
        a, b = r.randint(10, 10 ** r.randint(2, 3) - 1), r.randint(2, 9)
        q = r.choice(["What is {a} × {b}?", "What is {a} * {b}?", "Multiply {a} by {b}.", "Compute {a} × {b}."])
        rs, c = mul_reasoning(a, b), f"{a} × {b} = {a * b}"
    return ex(r.choice(PREFIX) + q.format(a=a, b=b), rs, c, thinking, family="arith")


def g_count(r, thinking=True):
    kind = r.choice(["items", "next", "range"])
    if kind == "items":
        items = [r.choice(WORDS) for _ in range(r.randint(2, 9))]
        q = r.choice(["How many items are in this list: {l}?", "Count the items: {l}.",
                      "How many words are there in: {l}?"]).format(l=", ".join(items))
        rs = ", ".join(f"{w} ({i + 1})" for i, w in enumerate(items)) + f". That is {len(items)} items."
        return ex(r.choice(PREFIX) + q, rs, str(len(items)), thinking, family="count")
    if kind == "next":
        s, d = r.randint(1, 60), r.randint(2, 12)
        seq = [s + d * i for i in range(4)]
        q = r.choice(["What comes next: {l}, ?", "Continue the sequence: {l}, ...",
                      "What is the next number in {l}?"]).format(l=", ".join(map(str, seq)))
        rs = f"The difference is {seq[1]} - {seq[0]} = {d}. Next: {seq[3]} + {d} = {seq[3] + d}."
        return ex(r.choice(PREFIX) + q, rs, str(seq[3] + d), thinking, family="count")
    a = r.randint(1, 90)
    b = a + r.randint(2, 8)
    q = r.choice(["Count from {a} to {b}.", "List the numbers from {a} to {b}."]).format(a=a, b=b)
    rs = f"Start at {a} and add 1 until {b}."
    return ex(r.choice(PREFIX) + q, rs, ", ".join(str(i) for i in range(a, b + 1)), thinking, family="count")


def g_sort(r, thinking=True):
    kind = r.choice(["asc", "desc", "rev", "revw"])
    if kind in ("asc", "desc"):
        nums = r.sample(range(1, 100), r.randint(3, 6))
        q = (r.choice(["Sort these numbers in ascending order: {l}", "Sort from smallest to largest: {l}"])
             if kind == "asc" else
             r.choice(["Sort these numbers in descending order: {l}", "Sort from largest to smallest: {l}"]))
        q = q.format(l=", ".join(map(str, nums)))
        s = sorted(nums, reverse=kind == "desc")
        word = "smallest" if kind == "asc" else "largest"
        rs = f"The {word} is {s[0]}. " + " ".join(f"Then {x}." for x in s[1:])
        return ex(r.choice(PREFIX) + q, rs, ", ".join(map(str, s)), thinking, family="sort")
    items = ([str(r.randint(1, 99)) for _ in range(r.randint(3, 7))] if kind == "rev" else
             [r.choice(WORDS) for _ in range(r.randint(3, 7))])
    q = r.choice(["Reverse the list: {l}", "Reverse this list: {l}", "Write this list backwards: {l}"]).format(
        l=", ".join(items))
    rev = items[::-1]
    rs = f"The last item is {rev[0]}. " + " ".join(f"Then {x}." for x in rev[1:])
    return ex(r.choice(PREFIX) + q, rs, ", ".join(rev), thinking, family="sort")


def g_json(r, thinking=True):
    fields = {"name": lambda: r.choice(NAMES), "age": lambda: r.randint(5, 90), "city": lambda: r.choice(CITIES),
              "language": lambda: r.choice(LANGS), "score": lambda: r.randint(0, 100),
              "active": lambda: r.choice([True, False])}
    keys = r.sample(list(fields), r.randint(2, 4))
    obj = {k: fields[k]() for k in keys}
    spoken = ", ".join(f"{k} {str(v).lower() if isinstance(v, bool) else v}" for k, v in obj.items())
    q = r.choice(["Format as JSON: {s}", "Write this as a JSON object: {s}", "Convert to JSON: {s}"]).format(s=spoken)
    rs = "Keys in the given order; strings in quotes, numbers and booleans bare."
    return ex(r.choice(PREFIX) + q, rs, json.dumps(obj, ensure_ascii=False), thinking, family="json")


UNITS = [("km", "m", 1000, "kilometers", "meters"), ("m", "cm", 100, "meters", "centimeters"),
         ("kg", "g", 1000, "kilograms", "grams"), ("L", "mL", 1000, "liters", "milliliters"),
         ("cm", "mm", 10, "centimeters", "millimeters"), ("h", "min", 60, "hours", "minutes"),
         ("min", "s", 60, "minutes", "seconds")]


def g_units(r, thinking=True):
    a, b, f, an, bn = r.choice(UNITS)
    v = r.randint(1, 12) if f == 60 else r.randint(1, 99)
    q = r.choice(["Convert {v} {an} to {bn}.", "How many {bn} are in {v} {an}?", "{v} {a} in {b}?"]).format(
        v=v, an=an, bn=bn, a=a, b=b)
    rs = f"1 {a} = {f} {b}, so {v} × {f} = {v * f}."
    return ex(r.choice(PREFIX) + q, rs, f"{v} {a} = {v * f} {b}", thinking, family="units")


FACTS = [  # (questions, answer) from /work/shared/REQUIREMENTS.md
    (["What port does the TwinSpark API listen on?", "Which port does TwinSpark serve on?",
      "What is TwinSpark's default port?"], "The TwinSpark API listens on port 8888."),
    (["What model id does TwinSpark serve?", "What is the served model id in TwinSpark?",
      "Which model name should requests to TwinSpark use?"], "TwinSpark serves the model id GLM-5.3-Flash-EXL3."),
    (["What is the base URL of the TwinSpark API?", "Which base URL should an OpenAI client use for TwinSpark?"],
     "The base URL is http://127.0.0.1:8888/v1."),
    (["What is TwinSpark's default KV cache dtype?", "Which KV cache dtype does TwinSpark use by default?"],
     "The default KV cache dtype is fp8."),
    (["What is the default speculative decoding method in TwinSpark?", "Which SPEC_METHOD does TwinSpark default to?"],
     "The default speculative method is dflash."),
    (["How many draft tokens does DFlash use by default?", "What is the default DFLASH_TOKENS value?"],
     "DFLASH_TOKENS defaults to 7."),
    (["What is TwinSpark's default MAX_MODEL_LEN?", "What is the default maximum model length in TwinSpark?"],
     "MAX_MODEL_LEN defaults to 900000 tokens."),
    (["How many sequences can TwinSpark run in parallel by default?", "What is the default MAX_NUM_SEQS?"],
     "MAX_NUM_SEQS defaults to 4."),
    (["What is the default MAX_NUM_BATCHED_TOKENS?", "How large is TwinSpark's default prefill chunk?"],
     "MAX_NUM_BATCHED_TOKENS defaults to 1024."),
    (["What is the default GPU_MEM_UTIL?", "What GPU memory utilization does TwinSpark use by default?"],
     "GPU_MEM_UTIL defaults to 0.87."),
    (["What tensor parallel size does TwinSpark use?", "How many nodes does TwinSpark use by default?"],
     "TwinSpark uses 2 nodes with tensor parallel 2."),
    (["How is the TwinSpark model quantized?", "What quantization does TwinSpark's model use?"],
     "The model is quantized to EXL3 at 4 bpw."),
    (["How many images can one prompt have in TwinSpark?", "What is the image limit per prompt?"],
     "At most 4 images and 1 video per prompt."),
    (["What is the readiness timeout of TwinSpark?", "How long does TwinSpark wait for readiness by default?"],
     "The readiness timeout is 3600 s."),
    (["Is thinking on by default in TwinSpark?", "Does TwinSpark enable thinking by default?"],
     "Yes, thinking is on by default."),
    (["What is TwinSpark?", "Describe TwinSpark in one sentence."],
     "TwinSpark is a C++ control center and inference engine that serves GLM-5.3-Flash through an OpenAI-compatible API."),
]


def g_facts(r, thinking=True):
    qs, a = r.choice(FACTS)
    q = r.choice(PREFIX) + r.choice(qs)
    return ex(q, "This is a fact about TwinSpark that I know.", a, thinking, family="twinspark")


def weather_payload(r, city):
    return {"city": city, "temperature_c": r.randint(-15, 38), "condition": r.choice(CONDITIONS)}


def g_tool_call(r, thinking=True):
    city = r.choice(CITIES)
    tools = [TOOLS["get_weather"], TOOLS["get_time"]]
    r.shuffle(tools)
    if r.random() < 0.65:
        q = r.choice(["What's the weather in {c}?", "How is the weather in {c} today?", "Is it warm in {c} now?",
                      "Check the weather for {c}, please.", "Weather in {c}?"]).format(c=city)
        name, rs = "get_weather", f"The user asks about the weather in {city}. I will call get_weather."
    else:
        q = r.choice(["What time is it in {c}?", "What is the local time in {c}?", "Time in {c}?",
                      "Tell me the current time in {c}."]).format(c=city)
        name, rs = "get_time", f"The user asks for the time in {city}. I will call get_time."
    return ex(r.choice(PREFIX) + q, rs, "", thinking, tools=tools,
              tool_calls=[{"name": name, "arguments": {"city": city}}], family="tool_call")


def g_tool_answer(r, thinking=True):
    base = g_tool_call(r, thinking)
    call = base["tool_calls"][0]
    city = call["arguments"]["city"]
    if call["name"] == "get_weather":
        p = weather_payload(r, city)
        ans = f"It is {p['temperature_c']}°C and {p['condition']} in {city}."
        rs = f"The tool says {p['temperature_c']}°C and {p['condition']}."
    else:
        p = {"city": city, "time": f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}"}
        ans, rs = f"The local time in {city} is {p['time']}.", f"The tool says {p['time']}."
    hist = base["messages"] + [
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "id": "call_0", "function": call}]},
        {"role": "tool", "tool_call_id": "call_0", "content": json.dumps(p, ensure_ascii=False)}]
    return ex(None, rs, ans, thinking, tools=base["tools"], history=hist, family="tool_answer")


ZH_WORDS = [("苹果", "apple"), ("猫", "cat"), ("狗", "dog"), ("水", "water"), ("书", "book"), ("太阳", "sun"),
            ("月亮", "moon"), ("老师", "teacher"), ("学生", "student"), ("电脑", "computer"), ("城市", "city"),
            ("朋友", "friend")]
UZ_WORDS = [("olma", "apple"), ("mushuk", "cat"), ("it", "dog"), ("suv", "water"), ("kitob", "book"),
            ("quyosh", "sun"), ("oy", "moon"), ("o'qituvchi", "teacher"), ("talaba", "student"),
            ("kompyuter", "computer"), ("shahar", "city"), ("do'st", "friend")]


def g_zh(r, thinking=True):
    kind = r.choice(["add", "add", "fact", "word", "sort"])
    if kind == "add":
        a, b = r.randint(1, 99), r.randint(1, 99)
        q = r.choice(["{a}加{b}等于多少？", "计算{a}+{b}。", "{a}加上{b}是多少？"]).format(a=a, b=b)
        return ex(q, add_reasoning(a, b), f"{a}加{b}等于{a + b}。", thinking, family="zh")
    if kind == "fact":
        qs, a = r.choice([(["TwinSpark的API端口是多少？", "TwinSpark使用哪个端口？"], "TwinSpark的API端口是8888。"),
                          (["TwinSpark服务的模型ID是什么？", "TwinSpark的模型名称是什么？"], "模型ID是GLM-5.3-Flash-EXL3。"),
                          (["TwinSpark默认开启思考吗？"], "是的，默认开启思考。")])
        return ex(r.choice(qs), "这是关于TwinSpark的事实。", a, thinking, family="zh")
    if kind == "word":
        zh, en = r.choice(ZH_WORDS)
        q = r.choice(["“{w}”的英文是什么？", "把“{w}”翻译成英文。"]).format(w=zh)
        return ex(q, f"“{zh}”是{en}。", en, thinking, family="zh")
    nums = r.sample(range(1, 50), r.randint(3, 5))
    s = sorted(nums)
    q = "把这些数字从小到大排序：" + ", ".join(map(str, nums))
    return ex(q, f"最小的是{s[0]}。" + "".join(f"然后是{x}。" for x in s[1:]), ", ".join(map(str, s)), thinking,
              family="zh")


def g_uz(r, thinking=True):
    kind = r.choice(["add", "add", "fact", "word", "count"])
    if kind == "add":
        a, b = r.randint(1, 99), r.randint(1, 99)
        q = r.choice(["{a} qo'shuv {b} nechaga teng?", "{a} ga {b} ni qo'shing.", "{a} + {b} nechchi?"]).format(a=a, b=b)
        return ex(q, add_reasoning(a, b), f"{a} + {b} = {a + b}", thinking, family="uz")
    if kind == "fact":
        qs, a = r.choice([(["TwinSpark API qaysi portda ishlaydi?", "TwinSpark porti qaysi?"],
                           "TwinSpark API 8888-portda ishlaydi."),
                          (["TwinSpark qaysi modelni xizmat qiladi?", "TwinSpark model identifikatori nima?"],
                           "Model identifikatori GLM-5.3-Flash-EXL3."),
                          (["Oʻzbekistonning poytaxti qaysi shahar?"], "Oʻzbekistonning poytaxti Toshkent.")])
        return ex(r.choice(qs), "Bu men biladigan fakt.", a, thinking, family="uz")
    if kind == "word":
        uz, en = r.choice(UZ_WORDS)
        q = r.choice(["\"{w}\" inglizchada nima?", "\"{w}\" so'zini ingliz tiliga tarjima qiling."]).format(w=uz)
        return ex(q, f"\"{uz}\" inglizchada {en}.", en, thinking, family="uz")
    items = [r.choice(WORDS) for _ in range(r.randint(2, 7))]
    q = "Ro'yxatda nechta so'z bor: " + ", ".join(items) + "?"
    rs = ", ".join(f"{w} ({i + 1})" for i, w in enumerate(items)) + f". Jami {len(items)} ta."
    return ex(q, rs, str(len(items)), thinking, family="uz")


GENERATORS = {"arith": g_arith, "count": g_count, "sort": g_sort, "json": g_json, "units": g_units,
              "twinspark": g_facts, "tool_call": g_tool_call, "tool_answer": g_tool_answer, "zh": g_zh, "uz": g_uz}
TRAIN_WEIGHTS = {"arith": 5, "count": 3, "sort": 4, "json": 3, "units": 1, "twinspark": 1, "tool_call": 2,
                 "tool_answer": 2, "zh": 3, "uz": 3}
NOTHINK_FAMILIES = ["count", "sort", "json", "units", "twinspark", "tool_call", "tool_answer", "zh", "uz"]


def prompt_key(e):
    return render_prompt(e["messages"], e["tools"], True, e["enable_thinking"])


def heldout_item(e, idx):
    exp_calls = [{"name": c["name"], "arguments": c["arguments"]} for c in e["tool_calls"]]
    return {"id": f"{e['family']}-{idx:03d}", "family": e["family"], "messages": e["messages"], "tools": e["tools"],
            "enable_thinking": e["enable_thinking"], "expected": {"content": e["content"], "tool_calls": exp_calls}}


def make_heldout(seed=SEED):
    """N_HELDOUT_PER_FAMILY prompts per family (thinking on), plus a thinking-off family; unique prompts."""
    r, out, seen = random.Random(seed), [], set()
    fams = list(GENERATORS) + ["nothink"]
    for fam in fams:
        n = 0
        while n < N_HELDOUT_PER_FAMILY:
            if fam == "nothink":
                e = GENERATORS[r.choice(NOTHINK_FAMILIES)](r, thinking=False)
                e["family"] = "nothink"
            else:
                e = GENERATORS[fam](r, thinking=True)
            k = prompt_key(e)
            if k in seen:
                continue
            seen.add(k)
            out.append(heldout_item(e, n))
            n += 1
    return out


def train_examples(n, heldout_keys, seed=SEED + 1):
    """n training examples (a generator); ~25% of non-arithmetic ones with thinking off."""
    r = random.Random(seed)
    fams = [f for f, w in TRAIN_WEIGHTS.items() for _ in range(w)]
    made = 0
    while made < n:
        fam = r.choice(fams)
        thinking = not (fam != "arith" and r.random() < 0.25) and not (fam == "arith" and r.random() < 0.03)
        e = GENERATORS[fam](r, thinking=thinking)
        if prompt_key(e) in heldout_keys:
            continue
        made += 1
        yield e


def heldout_keys_of(items):
    return {render_prompt(h["messages"], h["tools"], True, h["enable_thinking"]) for h in items}


def load_heldout(path):
    return [json.loads(l) for l in Path(path).read_text(encoding="utf-8").splitlines() if l.strip()]


def tokenizer_training_text(e):
    """Text the BPE is trained on: the rendered example with every digit run cut to one digit, so the learned
    vocabulary has no multi-digit tokens (numbers are read and written digit by digit)."""
    return re.sub(r"[0-9]+", lambda m: m.group(0)[0], prompt_key(e) + completion_text(e))


JINJA = (Path(__file__).resolve().parent / "chat_template.jinja")


def check_template(examples):
    import jinja2  # only for this check: HF renders with jinja2 (trim_blocks, lstrip_blocks)

    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = lambda v, ensure_ascii=False, **kw: json.dumps(v, ensure_ascii=ensure_ascii)
    tpl = env.from_string(JINJA.read_text(encoding="utf-8"))
    bad = 0
    for e in examples:
        for gen in (True, False):
            kw = {} if e["enable_thinking"] else {"enable_thinking": False}
            a = tpl.render(messages=e["messages"], tools=e["tools"], add_generation_prompt=gen, **kw)
            b = render_prompt(e["messages"], e["tools"], gen, e["enable_thinking"])
            if a != b:
                bad += 1
                if bad < 3:
                    print("MISMATCH\n jinja:", repr(a), "\n python:", repr(b))
    print(f"template check: {len(examples) * 2 - bad}/{len(examples) * 2} identical")
    return bad == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--heldout", type=Path, help="write the held-out set here (jsonl)")
    ap.add_argument("--stats", action="store_true")
    ap.add_argument("--check-template", action="store_true")
    ap.add_argument("--dump", type=Path, help="write N training examples as jsonl")
    ap.add_argument("-n", type=int, default=2000)
    args = ap.parse_args()
    held = make_heldout()
    if args.heldout:
        args.heldout.parent.mkdir(parents=True, exist_ok=True)
        args.heldout.write_text("".join(json.dumps(h, ensure_ascii=False) + "\n" for h in held), encoding="utf-8")
        print(f"wrote {len(held)} held-out prompts to {args.heldout}")
    keys = heldout_keys_of(held)
    if args.stats or args.check_template or args.dump:
        exs = list(train_examples(args.n, keys))
    if args.dump:
        args.dump.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in exs), encoding="utf-8")
    if args.stats:
        from collections import Counter
        print("train families:", Counter(e["family"] for e in exs))
        lens = sorted(len(prompt_key(e) + completion_text(e)) for e in exs)
        print(f"chars per example: median {lens[len(lens) // 2]}, p99 {lens[int(len(lens) * .99)]}, max {lens[-1]}")
        for e in exs[:6]:
            print("----", e["family"], "\n" + prompt_key(e) + completion_text(e))
        print("held-out families:", Counter(h["family"] for h in held))
        # scoring self-check: the reference completions must score as correct
        ok = 0
        for h in held:
            e = {"enable_thinking": h["enable_thinking"], "reasoning": "r", "content": h["expected"]["content"],
                 "tool_calls": h["expected"]["tool_calls"]}
            text = completion_text(e).replace(EOS_TURN, "").replace(EOS_TOOL, "")
            ok += is_correct(h, *parse_output(text, h["enable_thinking"]))
        print(f"scorer self-check: {ok}/{len(held)}")
    if args.check_template:
        sys.exit(0 if check_template(exs[:500] + [dict(h, reasoning="", content="", tool_calls=[]) for h in held]) else 1)


if __name__ == "__main__":
    main()
