"""Regenerates test_jinja_cases.json: each language-feature case rendered by python3-jinja2 in HF's
configuration (see jinja_corpus.make_env). Run: python3 tests/unit/test_jinja_cases.py"""
import json, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
import jinja_corpus as jc
env = jc.make_env()
CASES = [
 # scoping
 ("loop_set_does_not_survive", "{% set x = 'outer' %}{% for i in [1,2] %}{{ x }}{% set x = i %}{{ x }};{% endfor %}{{ x }}", {}),
 ("loop_set_undefined_next_iter", "{% for m in msgs %}{% if m.r %}{% set r = m.r %}{% endif %}[{{ r is defined }}]{% endfor %}", {"msgs": [{"r": "a"}, {}]}),
 ("namespace_survives", "{% set ns = namespace(n=0, last=none) %}{% for i in range(5) %}{% set ns.n = ns.n + i %}{% set ns.last = i %}{% endfor %}{{ ns.n }} {{ ns.last }}", {}),
 ("if_does_not_scope", "{% if true %}{% set y = 1 %}{% endif %}{{ y }}", {}),
 ("macro_scope", "{% set g = 'G' %}{% macro m() %}{% set g = 'inner' %}{{ g }}{% endmacro %}{{ m() }}{{ g }}", {}),
 ("nested_loop_shadow", "{% for m in a %}{% for m in b %}{{ m }}{% endfor %}{{ m }}|{% endfor %}", {"a": [1, 2], "b": ["x", "y"]}),
 # loop vars
 ("loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }} {% endfor %}", {}),
 ("loop_filter_else", "{% for x in xs if x > 1 %}{{ loop.index }}:{{ x }} {% else %}none{% endfor %}|{% for x in [] %}a{% else %}empty{% endfor %}", {"xs": [1, 2, 3]}),
 ("loop_cycle_break_continue", "{% for i in range(10) %}{% if i == 1 %}{% continue %}{% endif %}{% if i > 4 %}{% break %}{% endif %}{{ loop.cycle('a', 'b') }}{{ i }}{% endfor %}", {}),
 ("dict_iteration", "{% for k in d %}{{ k }}{% endfor %}{% for k, v in d.items() %}{{ k }}={{ v }}{% endfor %}{{ d.keys() | list }}{{ d.values() | list }}", {"d": {"z": 1, "a": 2}}),
 # whitespace
 ("trim_lstrip", "<a>\n  {% if true %}\n  x\n  {% endif %}\n</a>\n", {}),
 ("minus_markers", "a  {{- ' b ' -}}  c {%- if true %} d {% endif -%}  e", {}),
 ("plus_marker", "x\n  {%+ if true %}y{% endif +%}\nz", {}),
 ("comment", "a {# hidden #} b\n  {#- x -#}  c", {}),
 ("raw", "{% raw %}{{ not evaluated }}{% endraw %}", {}),
 # expressions
 ("arith", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 10 / 4 }} {{ 10 // 4 }} {{ -10 // 4 }} {{ 10 % 3 }} {{ -10 % 3 }} {{ 1.5 + 1 }}", {}),
 ("concat", "{{ 'a' ~ 1 ~ none ~ true ~ undefined_var }} {{ 'x' + 'y' }} {{ [1] + [2] }}", {}),
 ("compare", "{{ 1 < 2 < 3 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] == [1, 2] }} {{ 'b' in 'abc' }} {{ 2 not in [1, 3] }} {{ 'k' in {'k': 1} }}", {}),
 ("logic", "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ not 0 }} {{ none or [] }} {{ 'a' if false }}|{{ 'a' if 0 else 'b' if 0 else 'c' }}", {}),
 ("slicing", "{{ s[1:] }} {{ s[:-1] }} {{ s[::2] }} {{ s[::-1] }} {{ l[1:3] }} {{ l[-2:] }} {{ l[5:] }} {{ s[0] }} {{ l[-1] }}", {"s": "héllo", "l": [1, 2, 3, 4]}),
 ("attr_index", "{{ m.content.0.type }} {{ m['content'][0]['type'] }} {{ m.missing is defined }} {{ m.content.5 is defined }}", {"m": {"content": [{"type": "text"}]}}),
 ("print_values", "{{ none }} {{ true }} {{ 3.0 }} {{ 1e16 }} {{ 0.00001 }} {{ [1, 'a', none, false, 2.5] }} {{ {'a': [1, {'b': 'c'}]} }} {{ (1,) }} {{ ('a', 2) }}", {}),
 ("unicode_strings", "{{ s | length }} {{ s.upper() }} {{ s | capitalize }} {{ s[1] }} {{ s | reverse }}", {"s": "привет мир"}),
 # filters
 ("tojson_variants", "{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ d | tojson(sort_keys=true) }}|{{ d | tojson(ensure_ascii=true) }}|{{ d | tojson(separators=(',', ':')) }}", {"d": {"b": [1, 2.5, None, True], "a": "é\"\n\u0001🚀", "e": {}, "f": []}}),
 ("filters_misc", "{{ ' x ' | trim }}|{{ 'abc' | upper }}|{{ 'Hello World' | lower }}|{{ 'hello world' | title }}|{{ 'aXbX' | replace('X', '-') }}|{{ [1, 2] | join(', ') }}|{{ [3, 1] | first }}|{{ [3, 1] | last }}|{{ 'ab' | list }}|{{ none | default('d') }}|{{ undefined_x | default('d') }}|{{ '' | default('e', true) }}|{{ 5 | string }}|{{ -3 | abs }}|{{ '42' | int + 1 }}|{{ '2.5' | float }}|{{ 2.567 | round(2) }}", {}),
 ("filters_seq", "{{ users | map(attribute='name') | join(',') }}|{{ users | selectattr('admin') | map(attribute='name') | list }}|{{ users | rejectattr('admin') | list | length }}|{{ [1, 2, 3, 4] | select('even') | list }}|{{ [1, 2, 3] | reject('odd') | list }}|{{ ['b', 'a', 'C'] | sort }}|{{ [1, 1, 2] | unique | list }}|{{ users | sort(attribute='name', reverse=true) | map(attribute='name') | first }}|{{ {'b': 1, 'a': 2} | dictsort }}|{{ [3, 5, 1] | max }}{{ [3, 5, 1] | min }}{{ [1, 2] | sum }}", {"users": [{"name": "bo", "admin": True}, {"name": "al", "admin": False}]}),
 ("indent_filter", "{{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}", {}),
 # tests
 ("tests", "{{ x is defined }}{{ y is undefined }}{{ none is none }}{{ 's' is string }}{{ {} is mapping }}{{ [] is sequence }}{{ 1 is number }}{{ 1 is integer }}{{ 1.0 is float }}{{ true is boolean }}{{ [] is iterable }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 'a' is eq 'a' }}{{ 1 is equalto 2 }}{{ 2 is gt 1 }}{{ 'a' is in 'abc' }}{{ 'abc' is lower }}{{ range is callable }}{{ 5 is not none }}", {"x": 1}),
 # string methods
 ("str_methods", "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ s.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ 'xxhixx'.strip('x') }}|{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}|{{ 'abcb'.find('b') }}{{ 'abcb'.rfind('b') }}{{ 'abcb'.count('b') }}|{{ '-'.join(['a', 'b']) }}|{{ '{} and {name}'.format(1, name='n') }}|{{ 'Hi'.replace('i', 'o') }}", {"s": "  hi there \n"}),
 ("dict_methods", "{{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 5) }} {{ d.items() | list }} {{ d['a'] }}", {"d": {"a": 1}}),
 # macros
 ("macros", "{% macro greet(name, greeting='Hello', punct='!') %}{{ greeting }}, {{ name }}{{ punct }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ greet('A') }} {{ greet('B', 'Hi') }} {{ greet(name='C', punct='?') }} {{ greet('D', 'Yo', '.', 1, 2) }}", {}),
 ("macro_recursion", "{% macro f(n) %}{{ n }}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}", {}),
 ("call_block", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}inside {{ 1 + 1 }}{% endcall %}", {}),
 ("set_block_and_filter_block", "{% set x %}Hello {{ who }}{% endset %}{{ x }}|{% set y | upper %}abc{% endset %}{{ y }}|{% filter upper %}shout {{ who }}{% endfilter %}", {"who": "you"}),
 ("tuple_set", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = (3, 4) %}{{ t[0] }}{{ t | length }}", {}),
 ("undefined_behaviour", "[{{ nope }}][{{ nope | length }}][{% for x in nope %}x{% endfor %}][{{ nope is string }}][{{ not nope }}][{{ nope == none }}]", {}),
]
out = []
for name, src, ctx in CASES:
    res = env.from_string(src).render(**ctx)
    out.append({"name": name, "template": src, "context": ctx, "expected": res})
json.dump(out, open(str(Path(__file__).with_name('test_jinja_cases.json')), 'w'), ensure_ascii=False, indent=1)
print(len(out))
