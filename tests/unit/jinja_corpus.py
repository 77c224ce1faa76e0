#!/usr/bin/env python3
"""Differential corpus for TwinSpark's Jinja renderer (used by tests/unit/test_chat_template_glm.cpp).

Renders, with python3-jinja2 configured as Hugging Face transformers does (ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, loopcontrols, HF's tojson, raise_exception, strftime_now):
  * every *.jinja chat template in --templates over --n generated conversations (system prompts,
    multi-turn, tools, tool calls, tool results, reasoning, enable_thinking, clear_thinking,
    reasoning_effort, image/video parts, content None, unicode and whitespace edge cases);
  * small feature templates (filters, tests, loops, scoping, tojson options) over random data;
  * "override" cases: the GLM-5.3-Flash vendor templates as TwinSpark patches them must render like
    the recipe's patched template (rendered here), with tool-call arguments sent as JSON strings.
Writes --out/manifest.json plus one context .json and one expected .txt per case.
"""
import argparse
import json
import random
import sys
from pathlib import Path

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


TEXTS = ["Hello", "What is 2+2?", "  padded text  ", "multi\nline\ntext\n", "你好，世界", "Привет, мир",
         "Salom dunyo", "emoji 🚀🎉 done", "tabs\tand\u3000ideographic space\u3000", "quotes \" and ' and \\",
         "", "</think>", "a<think>b</think>c", "Line with trailing newline\n", "\n\nleading newlines"]


def text(r):
    return r.choice(TEXTS)


def content(r, allow_media):
    k = r.random()
    if k < 0.7:
        return text(r)
    parts = []
    for _ in range(r.randint(1, 3)):
        c = r.random()
        if c < 0.5 or not allow_media:
            parts.append({"type": "text", "text": text(r)})
        elif c < 0.75:
            parts.append({"type": "image"})
        else:
            parts.append({"type": "video"})
    return parts


def arg_value(r):
    return r.choice(["Paris", "東京", 2, 3.5, 1e20, -0.0, True, False, None, [1, "two", 3.0],
                     {"nested": {"x": [1, 2]}, "u": "ü"}, "", "with \"quotes\"", "line\nbreak"])


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Get the weather.",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string", "description": "城市"},
                                          "days": {"type": "integer"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "search", "description": "Search the web", "strict": True,
                                      "parameters": {"type": "object", "properties": {
                                          "query": {"type": "string"}, "top_k": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "lazy_tool", "description": "deferred", "defer_loading": True,
                                      "parameters": {"type": "object", "properties": {}}}},
]


def tool_call(r, i):
    name = r.choice(["get_weather", "search", "noop"])
    args = {k: arg_value(r) for k in r.sample(["city", "days", "query", "top_k", "extra"], r.randint(0, 3))}
    tc = {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}
    if r.random() < 0.1:
        tc = {"id": f"call_{i}", "name": name, "arguments": args}  # bare form some clients send
    return tc


def conversation(r):
    msgs = []
    if r.random() < 0.6:
        msgs.append({"role": "system", "content": content(r, False)})
    call_id = 0
    for _ in range(r.randint(1, 4)):
        msgs.append({"role": "user", "content": content(r, True)})
        if r.random() < 0.3:
            break
        a = {"role": "assistant", "content": text(r)}
        k = r.random()
        if k < 0.4:
            a["reasoning_content"] = text(r)
        elif k < 0.55:
            a["content"] = "<think>" + text(r) + "</think>" + text(r)
        if r.random() < 0.35:
            calls = [tool_call(r, call_id + j) for j in range(r.randint(1, 3))]
            call_id += len(calls)
            a["tool_calls"] = calls
            if r.random() < 0.4:
                a["content"] = None
            msgs.append(a)
            order = list(range(len(calls)))
            if r.random() < 0.3:
                r.shuffle(order)
            for j in order:
                msgs.append({"role": "tool", "tool_call_id": calls[j]["id"],
                             "content": r.choice(['{"temp_c": 18}', "plain result", "结果", ""])})
        else:
            msgs.append(a)
    return msgs


def kwargs(r):
    kw = {}
    if r.random() < 0.5:
        kw["enable_thinking"] = r.choice([True, False])
    if r.random() < 0.3:
        kw["clear_thinking"] = r.choice([True, False])
    if r.random() < 0.3:
        kw["reasoning_effort"] = r.choice(["low", "high", "max", "medium", None])
    if r.random() < 0.1:
        kw["thinking"] = r.choice([True, False])
    return kw


# Feature templates: each is rendered with a random `data` value.
FEATURES = [
    "{{ data | tojson }}|{{ data | tojson(indent=2) }}|{{ data | tojson(sort_keys=True, ensure_ascii=True) }}",
    "{{ data | tojson(separators=(',', ':')) }}|{{ data | string }}|{{ data }}",
    "{% for x in data if x %}{{ loop.index }}/{{ loop.length }}:{{ x }}{{ ',' if not loop.last }}{% else %}empty{% endfor %}",
    "{% set n = namespace(c=0) %}{% for x in data %}{% set y = x %}{% set n.c = n.c + 1 %}{% endfor %}{{ n.c }}{{ y is defined }}",
    "{{ data | length }} {{ data is sequence }} {{ data is mapping }} {{ data is string }} {{ data is iterable }} {{ data is number }}",
    "{% if data is string %}{{ data.strip() }}|{{ data.split() }}|{{ data.upper() }}|{{ data | title }}|{{ data[1:3] }}|{{ data[::-1] }}{% endif %}",
    "{% if data is mapping %}{% for k, v in data.items() %}{{ k }}={{ v }};{% endfor %}{{ data.get('a', 'none') }}{% endif %}",
    "{{ data | first if data else 'x' }} {{ (data | list)[-1:] if data else 'y' }} {{ data | default('D') }}",
    "{% macro m(a, b='B') %}[{{ a }}{{ b }}{{ varargs }}]{% endmacro %}{{ m(data) }}{{ m(1, 2, 3) }}{{ m(b=data, a=0) }}",
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 1 / 4 }} {{ 'ab' * 3 }} {{ 1 == 1.0 }} {{ 3 > 2 > 1 }}",
    "{%- for i in range(3) -%}\n  {{ i }}\n{%- endfor %}\n  {% if true %}\n    x\n  {% endif %}\n",
    "{% set s %}block {{ data | string | trim }}{% endset %}{{ s | upper }}",
    "{{ data | select('string') | list if data is sequence and data is not string and data is not mapping else '-' }}",
    "{{ [3, 1, 2] | sort | join(',') }} {{ ['b', 'A', 'c'] | sort | join }} {{ [1, 2, 2, 3] | unique | list }} {{ [1, 2] | map('string') | join('+') }}",
    "{{ 'a,b,,c'.split(',') }} {{ 'xxhixx'.strip('x') }} {{ 'Hello'.replace('l', 'L') }} {{ 'abc'.startswith(('x', 'a')) }}",
    "{{ none }} {{ true }} {{ 1.0 }} {{ 1e20 }} {{ 0.0001 }} {{ 1.5e-7 }} {{ -0.0 }} {{ [none, true, 'it''s'] }}",
]


def feature_data(r):
    return r.choice([[], [1, 2, 0, 3], ["a", "", "b"], {"a": 1, "b": [1, 2], "c": None}, "  Hello World  ",
                     "ab", 42, 3.25, None, True, {"ü": "ö", "emoji": "🚀", "ctrl": "\x01\t"},
                     [{"x": 1}, {"x": 2}], "multi\nline"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--templates", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    r = random.Random(a.seed)
    env = make_env()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    manifest = []

    def emit(kind, template, ctx, tmpl_obj, extra=None):
        i = len(manifest)
        try:
            expected = tmpl_obj.render(**ctx)
            err = None
        except Exception as e:  # noqa: BLE001 - any jinja2 failure: we must fail too
            expected, err = None, f"{type(e).__name__}: {e}"
        (out / f"ctx_{i}.json").write_text(json.dumps(ctx, ensure_ascii=False), encoding="utf-8")
        entry = {"kind": kind, "template": str(template), "context": f"ctx_{i}.json", "error": err}
        if expected is not None:
            (out / f"exp_{i}.txt").write_text(expected, encoding="utf-8", newline="")
            entry["expected"] = f"exp_{i}.txt"
        if extra:
            entry.update(extra)
        manifest.append(entry)

    templates = sorted(Path(a.templates).glob("*.jinja"))
    if not templates:
        sys.exit("no templates in " + a.templates)
    compiled = {p: env.from_string(p.read_text(encoding="utf-8")) for p in templates}
    recipe = next((p for p in templates if p.name == "glm-5.3-flash_miaai-recipe-patched.jinja"), None)
    for n in range(a.n):
        msgs = conversation(r)
        ctx = {"messages": msgs, "tools": TOOLS if r.random() < 0.4 else None,
               "add_generation_prompt": r.random() < 0.8, **kwargs(r)}
        for p in templates:
            emit("chat", p, ctx, compiled[p])
        if recipe is not None:
            # The same request through ChatTemplate's override on the vendor template; arguments as strings.
            sent = json.loads(json.dumps(msgs))
            for m in sent:
                for tc in m.get("tool_calls") or []:
                    fn = tc.get("function", tc)
                    if r.random() < 0.7:
                        fn["arguments"] = json.dumps(fn["arguments"], ensure_ascii=r.random() < 0.5)
            for p in templates:
                if p.name in ("glm-5.3-flash.jinja",):
                    kw = {k: v for k, v in ctx.items() if k not in ("messages", "tools", "add_generation_prompt")}
                    emit("override", p, ctx, compiled[recipe],
                         {"api": {"messages": sent, "tools": ctx["tools"], "add_generation_prompt":
                                  ctx["add_generation_prompt"], "kwargs": kw}})
    for f_i, src in enumerate(FEATURES):
        path = out / f"feature_{f_i}.jinja"
        path.write_text(src, encoding="utf-8")
        t = env.from_string(src)
        for _ in range(max(3, a.n // 20)):
            emit("feature", path, {"data": feature_data(r)}, t)
    (out / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1), encoding="utf-8")
    print(f"jinja2 {jinja2.__version__}: {len(manifest)} cases")


if __name__ == "__main__":
    main()
