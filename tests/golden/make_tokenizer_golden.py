#!/usr/bin/env python3
"""Golden data for TwinSpark's tokenizer (engine/text/tokenizer.*): parity with Hugging Face `tokenizers`.

Builds a GLM-style tokenizer.json: GLM-4.x/5's configuration (no normalizer; pre-tokenizer = Split with the
GLM-4 regex, behaviour Isolated, then ByteLevel without its own regex; byte-level BPE; ByteLevel decoder;
GLM's added tokens in GLM's order with GLM's special/non-special flags) around a small vocabulary trained here
with the `tokenizers` BPE trainer on text this script generates. Then records, for 2,000+ strings, the ids
`tokenizers` gives (with and without special-token recognition), its decode output, its pre-token pieces, its
lossy decode of random id sequences, what it does with strings that cannot be UTF-8 (lone surrogates) and with
invalid UTF-8 bytes decoded the Python way (errors="replace"), and its encode time on ~1 MB of text.

Usage (needs python3 with tokenizers 0.23; no network):
    python3 tests/golden/make_tokenizer_golden.py --out tests/golden/tokenizer
    python3 tests/golden/make_tokenizer_golden.py --dry      # only generate strings and print counts
Everything depends only on the seeds below; the C++ test rebuilds the benchmark text from golden.json.
"""
import argparse, json, os, random, sys, time
from pathlib import Path

SEED = 20260611
VOCAB_SIZE = 6000
# GLM-4 family pre-tokenizer regex, as in GLM-4.5/4.6/4.7/5 tokenizer.json (llama.cpp LLAMA_VOCAB_PRE_TYPE_CHATGLM4).
GLM_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# GLM-4.5's added tokens in id order (GLM-5 ids = these + 3491). special=False: the reasoning/tool tags that
# must decode as text (spec glm_dsa.md §6.1); everything else is a control token.
GLM_ADDED = [
    ("<|endoftext|>", True), ("[MASK]", True), ("[gMASK]", True), ("[sMASK]", True), ("<sop>", True),
    ("<eop>", True), ("<|system|>", True), ("<|user|>", True), ("<|assistant|>", True),
    ("<|observation|>", True), ("<|begin_of_image|>", True), ("<|end_of_image|>", True),
    ("<|begin_of_video|>", True), ("<|end_of_video|>", True), ("<|begin_of_audio|>", True),
    ("<|end_of_audio|>", True), ("<|begin_of_transcription|>", True), ("<|end_of_transcription|>", True),
    ("<|code_prefix|>", True), ("<|code_middle|>", True), ("<|code_suffix|>", True),
    ("<think>", False), ("</think>", False), ("<tool_call>", False), ("</tool_call>", False),
    ("<tool_response>", False), ("</tool_response>", False), ("<arg_key>", False), ("</arg_key>", False),
    ("<arg_value>", False), ("</arg_value>", False), ("/nothink", False), ("<|begin_of_box|>", False),
    ("<|end_of_box|>", False), ("<|image|>", True), ("<|video|>", True),
]

EN_WORDS = ("the of and to in is it that was for on are with as I his they be at one have this from or had by "
            "word but what some we can out other were all there when up use your how said an each she which do "
            "their time if will way about many then them write would like so these her long make thing see him "
            "two has look more day could go come did number sound no most people my over know water than call "
            "first who may down side been now find tokenizer inference engine model weights attention kernel "
            "Hopper GPU memory bandwidth latency throughput streaming decode encode merge vocabulary").split()
EN_CONTRACTIONS = ["don't", "it's", "we're", "they've", "I'm", "you'll", "she'd", "IT'S", "We'RE", "THEY'LL",
                   "John's", "can't", "won't", "o'clock", "rock'n'roll", "'tis", "ma'am", "Y'ALL"]
ZH = ("的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而"
      "方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好"
      "应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向"
      "道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件"
      "长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处理世")
ZH_PUNCT = "，。！？；：“”‘’（）《》、…—"
UZ_LATIN = ("Oʻzbekiston Respublikasi mustaqil davlat. Toshkent shahri gʻoyat goʻzal. Bog‘da o'rik gullari ochildi. "
            "Men o‘zbek tilini o'rganyapman. Sh ch ng: shahar, choy, tong. Qishloqda yashaymiz. "
            "Gʻalaba, oʻqituvchi, maʼno, taʼlim, sanʼat, mo‘jiza").split()
UZ_CYR = ("Ўзбекистон Республикаси мустақил давлат. Тошкент шаҳри ғоят гўзал. Боғда ўрик гуллари очилди. "
          "Мен ўзбек тилини ўрганяпман. Қишлоқда яшаймиз. Ғалаба, ўқитувчи, маъно, таълим, санъат, мўъжиза. "
          "Ҳаммаси яхши бўлади").split()
EMOJI = ["😀", "😂", "🥲", "👍", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇿", "🇨🇳", "1️⃣", "❤️", "🔥", "🚀", "🤖", "✅", "☕",
         "🧑🏿‍💻", "🫠", "😶‍🌫️", "🐍"]
CODE = [
    "def f(x):\n    return x * 2\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
    "#include <vector>\nint main() { std::vector<int> v{1, 2, 3}; return v.size(); }\r\n",
    '{"name": "TwinSpark", "version": [1, 2, 3], "ok": true, "ptr": null}',
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "if __name__ == '__main__':\n    main()\n\n\n",
    "fn main() -> Result<(), Box<dyn Error>> { println!(\"{}\", 0x1F600); Ok(()) }",
    "    x = [i**2 for i in range(10) if i % 3 != 0]  # comment\n",
    "<html><body class=\"main\">&nbsp;&lt;tag&gt;</body></html>",
    "$ cmake -S . -B build -G Ninja && cmake --build build -j2\n",
    "a_b__c___d == e->f::g<<h>>i;;;",
    "template<typename T> T max(T a, T b) { return a > b ? a : b; }",
]
ODD = ["e\u0301", "Z\u0351\u0358\u0363a\u0489l\u0300\u0301go", "\u0645\u0631\u062d\u0628\u0627", "\u05e9\u05dc\u05d5\u05dd",
       "\u0928\u092e\u0938\u094d\u0924\u0947", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35", "\uc548\ub155\ud558\uc138\uc694",
       "\u3053\u3093\u306b\u3061\u306f", "\u30ab\u30bf\u30ab\u30ca", "\u200b", "\u200c", "\u200d", "\ufeff", "\u00ad",
       "\ufffd", "\ue000", "\uffff", "\U0010ffff", "\U0001d400\U0001d401", "\x00", "\x01", "\x1f", "\x7f", "\x85",
       "\u180e", "\u2028", "\u2029", "\u00a0", "\u3000", "\u2003", "\u202f", "\u205f", "\x0b", "\x0c", "\r", "\t",
       "\u017f", "'\u017f", "'\u017fT", "\u212a", "\u0130\u0131", "\u03c3\u03c2\u03a3", "\u2019s", "'S", "'Ll",
       "\uff11\uff12\uff13", "\u0663\u0664\u0665", "\u00b2\u00b3", "\u00bd", "\u216b", "\u2460\u2461", "\u0f33",
       "\U0001f1fa", "\ufe0f", "\U000e0041", "\u0300", "\u1e9e\u00df", "\ufb01", "\u2126", "\u00b5",
       "\u02bb", "\u02bc", "\u2018", "\u2019", "\u201c", "\u201d", "\u00ab\u00bb", "\u2014", "\u2026", "\u00b7"]
SPECIAL_TEXT = [
    "[gMASK]<sop><|system|>\nYou are a helpful assistant.<|user|>\nHi!<|assistant|>\n<think>",
    "<|user|>hello<|assistant|>", "<think>x</think>", "<think></think>\nanswer", "<|use", "<<|user|>>",
    "<think><think>", "</think></think>", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Tashkent"
    "</arg_value></tool_call>", "<tool_response>{\"t\": 21}</tool_response>", "/nothink please", "x/nothinky",
    "<|endoftext|><|endoftext|>", "[MASK][sMASK][gMASK]", " <|user|> ", "\n<|observation|>\n", "<sop><eop>",
    "<|begin_of_image|><|image|><|end_of_image|>", "<|begin_of_video|><|video|><|end_of_video|>",
    "<|begin_of_box|>42<|end_of_box|>", "<|code_prefix|>def<|code_middle|>x<|code_suffix|>", "<|user",
    "|user|>", "<|User|>", "< |user|>", "<think >", "<|system|><|system|>", "[gMASK", "gMASK]", "<|image|>ok",
    "a<|assistant|>b<think>c</think>d<tool_call>e</tool_call>f", "<|endoftext|>\u4e2d\u6587<|user|>\U0001f600",
]


def rand_ws(r):
    return r.choice([" ", "  ", "\t", "\n", "\r\n", "\n\n", " \n", "\n ", "   ", "\u00a0", "\u3000"])


def gen_en(r):
    words = [r.choice(EN_WORDS + EN_CONTRACTIONS) for _ in range(r.randint(1, 25))]
    s = " ".join(w.capitalize() if r.random() < 0.15 else (w.upper() if r.random() < 0.05 else w) for w in words)
    return s + r.choice(["", ".", "!", "?", "...", ",", ":", ";", " ", "\n"])


def gen_zh(r):
    out = []
    for _ in range(r.randint(1, 40)):
        out.append(r.choice(ZH) if r.random() < 0.85 else r.choice(ZH_PUNCT + " 0123456789abc"))
    return "".join(out)


def gen_uz(r, words):
    return " ".join(r.choice(words) for _ in range(r.randint(1, 15))) + r.choice(["", ".", "!", "?\n"])


def gen_emoji(r):
    parts = []
    for _ in range(r.randint(1, 10)):
        parts.append(r.choice(EMOJI) if r.random() < 0.6 else r.choice(EN_WORDS + [" ", "  ", "!"] + list(ZH[:20])))
    return "".join(parts) if r.random() < 0.5 else " ".join(parts)


def gen_code(r):
    s = "".join(r.choice(CODE) for _ in range(r.randint(1, 3)))
    if r.random() < 0.3:
        s = s.replace("    ", "\t")
    return s


def gen_ws(r):
    kind = r.randint(0, 5)
    if kind == 0:
        return " " * r.randint(1, 300)
    if kind == 1:
        return "".join(rand_ws(r) for _ in range(r.randint(1, 60)))
    if kind == 2:
        return r.choice(EN_WORDS) + " " * r.randint(1, 80) + r.choice(EN_WORDS) + " " * r.randint(0, 3)
    if kind == 3:
        return "\n" * r.randint(1, 50) + r.choice(["", "x", " x", "\tx"]) + "\r\n" * r.randint(0, 10)
    if kind == 4:
        return "\t" * r.randint(1, 40) + "code" + " \t" * r.randint(1, 20)
    return " " * r.randint(0, 9) + "\n" + " " * r.randint(0, 9) + r.choice(["!", "a", "1", "\u4e2d", ""])


def gen_digits(r):
    kind = r.randint(0, 5)
    if kind == 0:
        return str(r.randint(0, 10 ** r.randint(1, 30)))
    if kind == 1:
        return f"{r.random() * 10 ** r.randint(0, 8):.{r.randint(0, 6)}f}"
    if kind == 2:
        return f"{r.randint(0, 10 ** 9):,}"
    if kind == 3:
        return " ".join(str(r.randint(0, 99999)) for _ in range(r.randint(1, 10)))
    if kind == 4:
        return r.choice(["\uff11\uff12\uff13\uff14", "\u0663\u0664\u0665\u0666", "\u00b2\u00b3\u00b9", "\u2160\u2161\u2162",
                         "\u0968\u0969", "1\u00bd", "x2", "v1.2.3", "2026-06-11T12:00:00Z", "+998 90 123-45-67"])
    return "".join(r.choice("0123456789") for _ in range(r.randint(1, 40))) + r.choice(["", "abc", " ", "\u4e2d"])


def gen_odd(r):
    return "".join(r.choice(ODD) if r.random() < 0.6 else r.choice(EN_WORDS + [" ", "'", "''"])
                   for _ in range(r.randint(1, 12)))


def gen_special(r):
    pool = [t for t, _ in GLM_ADDED] + SPECIAL_TEXT
    return "".join(r.choice(pool) if r.random() < 0.5 else gen_en(r) if r.random() < 0.5 else r.choice(ODD + [" ", "\n", "<", ">", "|"])
                   for _ in range(r.randint(1, 8)))


def gen_random(r):
    # Code points from everywhere (all planes, skipping surrogates), weighted towards ASCII and whitespace.
    out = []
    for _ in range(r.randint(1, 120)):
        x = r.random()
        if x < 0.35:
            cp = r.randint(0x20, 0x7E)
        elif x < 0.45:
            cp = r.choice([0x09, 0x0A, 0x0D, 0x20, 0x20, 0x0B, 0x0C, 0x85, 0xA0, 0x2028, 0x3000])
        elif x < 0.6:
            cp = r.randint(0x80, 0x7FF)
        elif x < 0.85:
            cp = r.randint(0x800, 0xFFFF)
        else:
            cp = r.randint(0x10000, 0x10FFFF)
        if 0xD800 <= cp <= 0xDFFF:
            cp = 0xFFFD
        out.append(chr(cp))
    return "".join(out)


def training_corpus(r):
    lines = []
    for _ in range(6000):
        lines.append(gen_en(r))
    for _ in range(3000):
        lines.append(gen_zh(r))
    for _ in range(1500):
        lines.append(gen_uz(r, UZ_LATIN))
        lines.append(gen_uz(r, UZ_CYR))
    for _ in range(800):
        lines.append(gen_emoji(r))
        lines.append(gen_code(r))
        lines.append(gen_ws(r))
        lines.append(gen_digits(r))
    return lines


def test_strings(r):
    items = [("empty", ""), ("single", "a"), ("single", " "), ("single", "\n")]
    items += [("special", s) for s in SPECIAL_TEXT] + [("special", t) for t, _ in GLM_ADDED]
    items += [("odd", s) for s in ODD] + [("code", s) for s in CODE]
    items += [("emoji", s) for s in EMOJI]
    gens = [("en", gen_en, 300), ("zh", gen_zh, 250), ("uz_latin", lambda q: gen_uz(q, UZ_LATIN), 150),
            ("uz_cyrillic", lambda q: gen_uz(q, UZ_CYR), 150), ("emoji", gen_emoji, 120), ("code", gen_code, 120),
            ("whitespace", gen_ws, 200), ("digits", gen_digits, 200), ("odd", gen_odd, 200),
            ("special", gen_special, 200), ("random", gen_random, 250)]
    for name, g, n in gens:
        items += [(name, g(r)) for _ in range(n)]
    # Mixed paragraphs and a few long texts (cache, long pieces, long whitespace runs).
    for _ in range(60):
        items.append(("mixed", "".join(r.choice([gen_en, gen_zh, gen_code, gen_ws, gen_digits, gen_emoji, gen_odd])(r)
                                        for _ in range(r.randint(2, 8)))))
    for _ in range(4):
        items.append(("long", "".join(r.choice([gen_en, gen_zh, gen_code, gen_ws, gen_digits])(r) for _ in range(400))))
    items.append(("long", " " * 5000 + "x" + "\n" * 3000))
    items.append(("long", "a" * 5000))
    items.append(("long", "\u4e2d" * 3000))
    return items


INVALID_BYTES = [b"\xff", b"\xfe\xff", b"\x80", b"a\x80b", b"\xc3", b"\xc3(", b"\xe4\xb8", b"\xe4\xb8a", b"\xf0\x9f\x98",
                 b"\xf0\x9f\x98 x", b"\xed\xa0\x80", b"\xed\xa0\x80\xed\xb0\x80", b"\xc0\xaf", b"\xe0\x80\xaf",
                 b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xf8\x88\x80\x80\x80", b"hello \xff world",
                 b"\xe4\xb8\xad\xe6\x96", b"<|user|>\xff<|assistant|>", b"\xc2\xa0\xc2", b"  \x80\x80  ",
                 b"\xef\xbf\xbd\xef\xbf", b"\x00\xff\x00", b"12\xb0C", b"caf\xe9", b"\xe2\x80\xa8\xe2\x80"]
SURROGATES = ["\ud800", "a\udc00b", "\ud83d", "\ud83d\ude00"[:1] + "x", "<|user|>\udfff"]


def fnv1a64(ids):
    """FNV-1a over the ids as 32-bit values (the C++ test computes the same)."""
    h = 0xCBF29CE484222325
    for i in ids:
        h = ((h ^ i) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def build_tokenizer(corpus):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(GLM_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer=trainer)
    for content, special in GLM_ADDED:  # one at a time, so ids follow GLM's order
        t = AddedToken(content, single_word=False, lstrip=False, rstrip=False, normalized=False, special=special)
        (tok.add_special_tokens if special else tok.add_tokens)([t])
    return tok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/golden/tokenizer")
    ap.add_argument("--dry", action="store_true")
    args = ap.parse_args()
    r = random.Random(SEED)
    corpus = training_corpus(r)
    items = test_strings(r)
    print(f"corpus lines {len(corpus)}, test strings {len(items)}", flush=True)
    if args.dry:
        return
    import tokenizers
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    tok = build_tokenizer(corpus)
    print(f"trained in {time.time() - t0:.1f}s; vocab {tok.get_vocab_size()}", flush=True)
    tok.save(str(out / "tokenizer.json"), pretty=False)
    tok = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))  # test what the file says
    split = tok.pre_tokenizer  # pieces are recorded after ByteLevel mapping, as tokenizers reports them
    cfg = {"added_tokens_decoder": {}, "bos_token": None, "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
           "clean_up_tokenization_spaces": False, "do_lower_case": False, "model_max_length": 1048576,
           "padding_side": "left", "remove_space": False, "tokenizer_class": "PreTrainedTokenizerFast",
           "extra_special_tokens": {},
           "chat_template": "[gMASK]<sop>{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}{% endfor %}"
                            "{% if add_generation_prompt %}<|assistant|>\n<think>{% endif %}"}
    for content, special in GLM_ADDED:
        i = tok.token_to_id(content)
        cfg["added_tokens_decoder"][str(i)] = {"content": content, "lstrip": False, "normalized": False,
                                               "rstrip": False, "single_word": False, "special": special}
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")

    cases = []
    for cat, text in items:
        tok.encode_special_tokens = False
        ids = tok.encode(text, add_special_tokens=True).ids
        tok.encode_special_tokens = True
        ids_ns = tok.encode(text, add_special_tokens=True).ids
        tok.encode_special_tokens = False
        c = {"cat": cat, "text": text, "ids": ids}
        if ids_ns != ids:
            c["ids_nospecial"] = ids_ns
        dec = tok.decode(ids, skip_special_tokens=False)
        if dec != text:
            c["decoded"] = dec
        dec_skip = tok.decode(ids, skip_special_tokens=True)
        if dec_skip != dec:
            c["decoded_skip"] = dec_skip
        if len(text) <= 120:
            c["pieces"] = [p for p, _ in split.pre_tokenize_str(text)]
        cases.append(c)
    n_vocab = tok.get_vocab_size(with_added_tokens=True)
    decodes = []
    for k in range(400):  # random id runs: lossy UTF-8 repair, specials skipped or not, unknown ids
        ids = [r.randrange(0, n_vocab + (20 if k % 4 == 0 else 0)) for _ in range(r.randint(1, 30))]
        if k % 3 == 0:
            ids = [i for i in ids if i < 256] or [200]  # single-byte tokens: mostly invalid UTF-8
        skip = k % 2 == 1
        decodes.append({"ids": ids, "skip": skip, "text": tok.decode(ids, skip_special_tokens=skip)})
    invalid = []
    for b in INVALID_BYTES:
        text = b.decode("utf-8", errors="replace")
        invalid.append({"hex": b.hex(), "replaced": text, "ids": tok.encode(text).ids})
    surrogates = []
    for s in SURROGATES:
        rec = {"wtf8_hex": s.encode("utf-8", errors="surrogatepass").hex()}
        try:
            rec["ids"] = tok.encode(s).ids
        except Exception as e:  # noqa: BLE001 - the point is to record what it does
            rec["error"] = f"{type(e).__name__}: {e}"
        surrogates.append(rec)

    # ~1 MB benchmark: the test strings joined with "\n", repeated; the C++ test builds the same text.
    unit = "\n".join(c["text"] for c in cases)
    reps = -(-(1 << 20) // len(unit.encode("utf-8")))
    bench = "\n".join([unit] * reps)
    bench_ids = tok.encode(bench).ids
    times = []
    for _ in range(5):
        t = time.perf_counter()
        tok.encode(bench)
        times.append(time.perf_counter() - t)
    nbytes = len(bench.encode("utf-8"))
    best = min(times)
    bench_rec = {"reps": reps, "bytes": nbytes, "n_ids": len(bench_ids),
                 "ids_fnv1a64": fnv1a64(bench_ids), "ids_head": bench_ids[:3000],
                 "hf_seconds_best": best, "hf_seconds_all": times, "hf_mb_per_s": nbytes / best / 1e6,
                 "tokenizers_version": tokenizers.__version__, "cpu_count": os.cpu_count(),
                 "RAYON_RS_NUM_THREADS": os.environ.get("RAYON_RS_NUM_THREADS")}
    golden = {"tokenizers_version": tokenizers.__version__, "seed": SEED, "vocab_size": n_vocab,
              "cases": cases, "decodes": decodes, "invalid_utf8": invalid, "surrogates": surrogates,
              "bench": bench_rec}
    (out / "golden.json").write_text(json.dumps(golden, ensure_ascii=True, separators=(",", ":")) + "\n")
    print(json.dumps(bench_rec, indent=1))
    print(f"cases {len(cases)}; golden.json {(out / 'golden.json').stat().st_size} bytes; "
          f"tokenizer.json {(out / 'tokenizer.json').stat().st_size} bytes", flush=True)


if __name__ == "__main__":
    sys.exit(main())
