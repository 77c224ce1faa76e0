// The embedded default model (resources/models/glm5-next-tiny and its EXL3 export) through `twinspark-cli serve`
// and the official `openai` npm client (pinned in package-lock.json): issue 8's proof that answers, tool calls and
// reasoning come through the OpenAI API. Unlike openai_client.test.mjs (random weights: protocol only) these
// cases check what the model says, so they fail when the model answers wrongly.
// Prompts and tools are those of the training distribution (tools/train/make_corpus.py: g_tool_call,
// g_tool_answer, g_facts, g_arith): the two tools in the same JSON, the tool result as the corpus writes it.
// Run by CTest through run_node_tests.sh (TS_CLI, TS_CHAT_MODEL_DIR = the model folder). Every wait is bounded.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, stopServer } from './serve_process.mjs';

const CLI = process.env.TS_CLI;
const MODEL_DIR = process.env.TS_CHAT_MODEL_DIR;
const KEY = 'embedded-test-key';
const MODEL = 'GLM-5.3-Flash-EXL3';
let server;
let base;
let client;


// make_corpus.py's TOOLS, in OpenAI's format (the server renders them with the model's chat_template.jinja).
const cityParam = {
  type: 'object', properties: { city: { type: 'string', description: 'City name' } }, required: ['city'],
};
const TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'Get the current weather for a city.', parameters: cityParam } },
  { type: 'function', function: { name: 'get_time', description: 'Get the current local time in a city.', parameters: cityParam } },
];
// Greedy decoding everywhere: the answers are deterministic for a given checkpoint.
const GREEDY = { model: MODEL, temperature: 0, max_tokens: 200 };

before(async () => {
  ({ server, base } = await startServer(CLI, MODEL_DIR, KEY, ['--max-model-len', '2048', '--kv-budget-mib', '64']));
  client = new OpenAI({ baseURL: `${base}/v1`, apiKey: KEY, maxRetries: 0, timeout: 120000 });
});

after(async () => {
  await stopServer(server);
});

// One streamed chat completion assembled into the shape of a non-streamed message: role, content, reasoning,
// tool calls (by index: id and name once, arguments concatenated), finish_reason, and the chunk counts.
async function streamed(body) {
  const stream = await client.chat.completions.create({ ...body, stream: true });
  const out = { role: undefined, content: '', reasoning: '', toolCalls: [], finish: [], contentChunks: 0, reasoningChunks: 0 };
  for await (const c of stream) {
    for (const ch of c.choices) {
      const d = ch.delta ?? {};
      if (d.role) out.role = d.role;
      if (d.content) { out.content += d.content; ++out.contentChunks; }
      const r = d.reasoning_content ?? d.reasoning;
      if (r) { out.reasoning += r; ++out.reasoningChunks; }
      for (const tc of d.tool_calls ?? []) {
        const t = (out.toolCalls[tc.index] ??= { id: '', type: '', function: { name: '', arguments: '' } });
        if (tc.id) t.id = tc.id;
        if (tc.type) t.type = tc.type;
        if (tc.function?.name) t.function.name += tc.function.name;
        if (tc.function?.arguments) t.function.arguments += tc.function.arguments;
      }
      if (ch.finish_reason) out.finish.push(ch.finish_reason);
    }
  }
  return out;
}

const reasoningOf = (m) => m.reasoning_content ?? m.reasoning ?? '';
const callsOf = (calls) => (calls ?? []).map((c) => ({ name: c.function.name, arguments: JSON.parse(c.function.arguments) }));

function weatherRequest(city) {
  return { ...GREEDY, messages: [{ role: 'user', content: `What's the weather in ${city}?` }], tools: TOOLS };
}

// (a) The tool is offered and the question needs it: one get_weather call whose arguments parse to {city}.
for (const city of ['Paris', 'Tokyo', 'Tashkent']) {
  test(`tool call: get_weather for ${city}, finish_reason tool_calls, typed arguments`, async () => {
    const r = await client.chat.completions.create(weatherRequest(city));
    const ch = r.choices[0];
    assert.equal(ch.finish_reason, 'tool_calls', `finish_reason; message: ${JSON.stringify(ch.message)}`);
    assert.equal(ch.message.tool_calls?.length, 1, `one tool call; message: ${JSON.stringify(ch.message)}`);
    const call = ch.message.tool_calls[0];
    assert.equal(call.type, 'function');
    assert.match(call.id, /^call_/);
    assert.equal(call.function.name, 'get_weather');
    assert.equal(typeof call.function.arguments, 'string');
    const args = JSON.parse(call.function.arguments);
    assert.deepEqual(args, { city }, `arguments of the call for "${city}"`);
    assert.ok(!ch.message.content, `no content beside the call, got ${JSON.stringify(ch.message.content)}`);
  });
}

// (b) The tool's result goes back (role "tool" with the call's id) and the final answer uses it. The assistant
// turn is given as the corpus has it, so this case does not depend on (a).
for (const [city, tempC, condition] of [['Paris', 21, 'sunny'], ['Oslo', -4, 'snowy']]) {
  test(`tool result: the answer for ${city} uses the returned ${tempC}°C and ${condition}`, async () => {
    const messages = [
      { role: 'user', content: `What's the weather in ${city}?` },
      { role: 'assistant', content: '', tool_calls: [{ id: 'call_0', type: 'function',
        function: { name: 'get_weather', arguments: JSON.stringify({ city }) } }] },
      // what make_corpus.py's weather_payload + json.dumps write
      { role: 'tool', tool_call_id: 'call_0', content: `{"city": "${city}", "temperature_c": ${tempC}, "condition": "${condition}"}` },
    ];
    const r = await client.chat.completions.create({ ...GREEDY, messages, tools: TOOLS });
    const ch = r.choices[0];
    assert.equal(ch.finish_reason, 'stop', `finish_reason; message: ${JSON.stringify(ch.message)}`);
    assert.ok(!ch.message.tool_calls?.length, `no further tool call, got ${JSON.stringify(ch.message.tool_calls)}`);
    const content = ch.message.content ?? '';
    assert.ok(content.includes(`${tempC}°C`), `the answer carries the tool's temperature ${tempC}°C: ${JSON.stringify(content)}`);
    assert.ok(content.includes(condition), `the answer carries the tool's condition ${condition}: ${JSON.stringify(content)}`);
    assert.ok(content.includes(city), `the answer names ${city}: ${JSON.stringify(content)}`);
  });
}

// (c) Reasoning arrives separately from the content, non-streaming and streaming. The question is one of the
// corpus' phrasings (a paraphrase such as "What port does TwinSpark use?" is answered wrongly with thinking off).
test('reasoning arrives in reasoning_content, the content is the answer without <think>', async () => {
  const body = { ...GREEDY, messages: [{ role: 'user', content: 'What port does the TwinSpark API listen on?' }] };
  const r = await client.chat.completions.create(body);
  const m = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(reasoningOf(m).trim().length > 0, `non-empty reasoning, message: ${JSON.stringify(m)}`);
  assert.equal(m.reasoning_content, m.reasoning, 'both names carry the same reasoning');
  assert.ok(m.content && !/<\/?think>/.test(m.content), `content without think tags: ${JSON.stringify(m.content)}`);
  assert.ok(!/<\/?think>/.test(reasoningOf(m)), 'reasoning without think tags');
  assert.ok(m.content.includes('8888'), `the answer gives the port: ${JSON.stringify(m.content)}`);
  const s = await streamed(body);
  assert.equal(s.role, 'assistant');
  assert.ok(s.reasoningChunks > 0 && s.contentChunks > 0, 'reasoning and content both streamed');
  assert.ok(s.reasoning.trim().length > 0 && !/<\/?think>/.test(s.content + s.reasoning));
  assert.equal(s.content, m.content);
});

// Thinking off (chat_template_kwargs.enable_thinking = false, the corpus' "nothink" turns): no reasoning at all,
// and the answer is still right.
test('thinking off: no reasoning, the answer alone', async () => {
  const r = await client.chat.completions.create({
    ...GREEDY, messages: [{ role: 'user', content: 'What port does the TwinSpark API listen on?' }],
    chat_template_kwargs: { enable_thinking: false },
  });
  const m = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(!reasoningOf(m), `no reasoning with thinking off: ${JSON.stringify(m)}`);
  assert.ok(m.content && !/<\/?think>/.test(m.content), `content without think tags: ${JSON.stringify(m.content)}`);
  assert.ok(m.content.includes('8888'), `the answer gives the port: ${JSON.stringify(m.content)}`);
});

// (d) Under greedy sampling a stream assembles to exactly the non-streamed answer: content, reasoning, tool calls
// (name and arguments; ids are per response) and finish_reason.
test('streaming and non-streaming agree under greedy sampling', async () => {
  const bodies = [
    { ...GREEDY, messages: [{ role: 'user', content: 'What port does the TwinSpark API listen on?' }] },
    { ...GREEDY, messages: [{ role: 'user', content: 'What is 47 + 38?' }] },
    { ...GREEDY, messages: [{ role: 'user', content: 'Sort these numbers in ascending order: 9, 2, 7, 4' }],
      chat_template_kwargs: { enable_thinking: false } },
    weatherRequest('Paris'),
  ];
  for (const body of bodies) {
    const what = JSON.stringify(body.messages);
    const r = await client.chat.completions.create(body);
    const m = r.choices[0].message;
    const s = await streamed(body);
    assert.equal(s.content, m.content ?? '', `content, ${what}`);
    assert.equal(s.reasoning, reasoningOf(m), `reasoning, ${what}`);
    assert.deepEqual(s.finish, [r.choices[0].finish_reason], `finish_reason, ${what}`);
    assert.deepEqual(callsOf(s.toolCalls), callsOf(m.tool_calls), `tool calls, ${what}`);
    for (const tc of s.toolCalls) assert.ok(tc.id.startsWith('call_') && tc.type === 'function', 'streamed call id and type');
  }
  // the tool-call case did produce a call both ways (else the comparison above compared nothing)
  const r = await client.chat.completions.create(weatherRequest('Paris'));
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
});
