// The official `openai` npm client (pinned in package-lock.json) against the real `twinspark-cli serve`
// on a free loopback port, with the random-weight chat model of tests/fixtures/make_chat_model.py.
// Run by CTest through run_node_tests.sh (TS_CLI, TS_CHAT_MODEL_DIR). Every wait is bounded.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { sleep, startServer, stopServer } from './serve_process.mjs';

const CLI = process.env.TS_CLI;
const MODEL_DIR = process.env.TS_CHAT_MODEL_DIR;
const KEY = 'node-test-key';
const MODEL = 'GLM-5.3-Flash-EXL3';
let server;
let base;
let client;


async function metrics() {
  const r = await fetch(`${base}/metrics`, { headers: { Authorization: `Bearer ${KEY}` } });
  assert.equal(r.status, 200);
  return r.text();
}

function metric(text, name, labelPart = '') {
  for (const line of text.split('\n')) {
    if (line.startsWith(name + '{') && line.includes(labelPart)) return Number(line.split(' ').pop());
  }
  return NaN;
}

// Gauges are published after each engine step: a 1-token request provides one. True when nothing runs
// or waits and every KV block is free again.
async function waitIdle(ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    await client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 1 });
    const m = await metrics();
    if (metric(m, 'vllm:num_requests_running') === 0 && metric(m, 'vllm:num_requests_waiting') === 0 &&
        metric(m, 'twinspark:kv_cache_free_blocks') === metric(m, 'twinspark:kv_cache_blocks')) return true;
    await sleep(50);
  }
  return false;
}

before(async () => {
  ({ server, base } = await startServer(CLI, MODEL_DIR, KEY, ['--max-model-len', '2048', '--kv-budget-mib', '64', '--max-concurrent-requests', '64']));
  client = new OpenAI({ baseURL: `${base}/v1`, apiKey: KEY, maxRetries: 0, timeout: 60000 });
});

after(async () => {
  await stopServer(server);
});

test('models.list', async () => {
  const page = await client.models.list();
  assert.equal(page.data.length, 1);
  assert.equal(page.data[0].id, MODEL);
  assert.equal(page.data[0].max_model_len, 2048);
  const card = await client.models.retrieve(MODEL);
  assert.equal(card.id, MODEL);
  await assert.rejects(client.models.retrieve('gpt-4o'), (e) => e instanceof OpenAI.NotFoundError);
});

test('chat, non-streaming', async () => {
  const r = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 5, ignore_eos: true,
    chat_template_kwargs: { enable_thinking: false },
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.equal(r.usage.completion_tokens, 5);
  assert.equal(r.choices[0].finish_reason, 'length');
});

test('chat, streaming with usage', async () => {
  const stream = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Stream please' }], max_tokens: 6, ignore_eos: true, stream: true,
    stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  assert.ok(chunks.length >= 3);
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  const ids = new Set(chunks.map((c) => c.id));
  assert.equal(ids.size, 1);
  const last = chunks[chunks.length - 1];
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage.completion_tokens, 6);
  const finishes = chunks.filter((c) => c.choices.length && c.choices[0].finish_reason);
  assert.equal(finishes.length, 1);
  assert.equal(finishes[0].choices[0].finish_reason, 'length');
});

test('completions, plain and streaming', async () => {
  const r = await client.completions.create({ model: MODEL, prompt: ['Once upon', 'a time'], max_tokens: 3, n: 2, ignore_eos: true });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices.length, 4);
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2, 3]);
  const s = await client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 4, stream: true, ignore_eos: true,
    stream_options: { include_usage: true } });
  let text = '';
  let usage;
  for await (const c of s) {
    if (c.choices.length) text += c.choices[0].text;
    if (c.usage) usage = c.usage;
  }
  assert.equal(typeof text, 'string');
  assert.equal(usage.completion_tokens, 4);
});

test('tokenize and detokenize', async () => {
  const h = { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' };
  const t = await (await fetch(`${base}/tokenize`, { method: 'POST', headers: h,
    body: JSON.stringify({ prompt: 'Hello world' }) })).json();
  assert.ok(t.count > 0);
  const d = await (await fetch(`${base}/detokenize`, { method: 'POST', headers: h,
    body: JSON.stringify({ tokens: t.tokens }) })).json();
  assert.equal(d.prompt, 'Hello world');
});

test('errors surface as the right exception classes', async () => {
  const bad = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  await assert.rejects(
    client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], n: 0 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400);
  await assert.rejects(
    client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof OpenAI.NotFoundError && /does not exist/.test(e.message));
  await assert.rejects(
    client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 5000 }),
    (e) => e instanceof OpenAI.BadRequestError &&
      /This model's maximum context length is 2048 tokens\. However, you requested \d+ tokens/.test(e.message));
  await assert.rejects(client.get('/nonexistent'), (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
  await assert.rejects(
    client.chat.completions.create({ model: MODEL, messages: [] }),
    (e) => e instanceof OpenAI.BadRequestError && e.error?.param === 'messages');
});

test('abort via AbortController ends the request on the server', async () => {
  const before = metric(await metrics(), 'vllm:request_success_total', 'abort');
  const controller = new AbortController();
  const stream = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'long' }], max_tokens: 1900, ignore_eos: true, stream: true,
  }, { signal: controller.signal });
  // openai v5 ends the iteration quietly on an abort (older versions threw APIUserAbortError): accept both,
  // and check that no finish chunk arrived (the stream was cut, not completed).
  let n = 0;
  let finished = false;
  try {
    for await (const c of stream) {
      if (c.choices.length && c.choices[0].finish_reason) finished = true;
      if (++n === 2) controller.abort();
    }
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIUserAbortError || e.name === 'AbortError', `unexpected error ${e}`);
  }
  assert.equal(finished, false);
  assert.ok(n >= 2 && n < 100);
  const end = Date.now() + 3000;
  while (metric(await metrics(), 'vllm:request_success_total', 'abort') < before + 1) {
    assert.ok(Date.now() < end, 'the server did not abort the request within 3 s');
    await sleep(20);
  }
  assert.ok(await waitIdle(5000), 'KV pool not back to empty');
});

test('load: 32 concurrent streaming clients x 4 requests, some disconnecting early', async () => {
  const deadline = Date.now() + 120000;
  const errors = [];
  let completed = 0;
  let dropped = 0;
  async function clientLoop(c) {
    const own = new OpenAI({ baseURL: `${base}/v1`, apiKey: KEY, maxRetries: 0, timeout: 60000 });
    for (let i = 0; i < 4 && Date.now() < deadline; ++i) {
      const disconnect = (c + i) % 5 === 0;  // every fifth stream walks away after its first chunk
      const controller = new AbortController();
      // The SDK's timeout covers the response headers, not a stream that stops coming (the server's
      // keep-alive comments hold it open): bound the whole stream too, so an engine that stops making
      // progress fails this test with its state below instead of hanging it.
      let stalled = false;
      let received = 0;
      const guard = setTimeout(() => { stalled = true; controller.abort(); }, 30000);
      try {
        const stream = await own.chat.completions.create({
          model: MODEL, messages: [{ role: 'user', content: `client ${c} request ${i}` }], max_tokens: 12, ignore_eos: true,
          stream: true, stream_options: { include_usage: true }, chat_template_kwargs: { enable_thinking: false },
        }, { signal: controller.signal });
        const chunks = [];
        for await (const ch of stream) {
          chunks.push(ch);
          received = chunks.length;
          if (disconnect && chunks.length === 1) controller.abort();
        }
        if (stalled) {
          errors.push(`${c}/${i}: the stream stalled for 30 s after ${received} chunks`);
          continue;
        }
        if (disconnect) {  // the SDK ends the iteration quietly after an abort
          assert.ok(!chunks.some((x) => x.usage), 'an aborted stream must not have run to its usage chunk');
          ++dropped;
          continue;
        }
        // well-formed: role first, one finish, usage last, one id
        assert.equal(chunks[0].choices[0].delta.role, 'assistant');
        assert.equal(chunks.filter((x) => x.choices.length && x.choices[0].finish_reason).length, 1);
        assert.equal(chunks[chunks.length - 1].usage.completion_tokens, 12);
        assert.equal(new Set(chunks.map((x) => x.id)).size, 1);
        ++completed;
      } catch (e) {
        if (stalled) errors.push(`${c}/${i}: the stream stalled for 30 s after ${received} chunks (${e.message})`);
        else if (disconnect && (e instanceof OpenAI.APIUserAbortError || e.name === 'AbortError')) ++dropped;
        else errors.push(`${c}/${i}: ${e.message}`);
      } finally {
        clearTimeout(guard);
      }
    }
  }
  await Promise.all(Array.from({ length: 32 }, (_, c) => clientLoop(c)));
  if (errors.length) {  // the engine's own view, for whoever reads the failure
    const m = await metrics().catch((e) => `metrics unavailable: ${e.message}`);
    const state = m.split('\n').filter((l) => /^(vllm:num_requests_|twinspark:kv_cache_)/.test(l)).join('\n');
    assert.fail(`${errors.length} request(s) failed:\n${errors.join('\n')}\nengine state after the load:\n${state}`);
  }
  assert.ok(Date.now() < deadline, 'load test ran out of time');
  assert.equal(completed + dropped, 128);
  assert.ok(dropped > 0 && completed > 0);
  assert.ok(await waitIdle(10000), 'KV pool not back to empty after the load');
});
