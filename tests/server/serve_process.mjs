// The `twinspark-cli serve` process the node tests talk to: started on a free loopback port (port 0; the
// port is read from its "listening on" line), waited for until /health says 200, and stopped with SIGTERM,
// which must exit 0. Every wait is bounded. Shared by openai_client.test.mjs and embedded_model.test.mjs.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Starts `serve --model modelDir --port 0 --api-key key --quiet` plus `extraArgs`; resolves to
// { server, base } once /health answers 200.
export async function startServer(cli, modelDir, key, extraArgs = []) {
  assert.ok(cli && modelDir, 'TS_CLI and TS_CHAT_MODEL_DIR must be set (run through CTest)');
  const server = spawn(cli, ['serve', '--model', modelDir, '--port', '0', '--api-key', key, '--quiet', ...extraArgs],
    // No deployment .env of the machine's user may change what is tested (serve reads one when present).
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, TWINSPARK_ENV: '/dev/null' } });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('server did not print its port in 30 s:\n' + log)), 30000);
    server.stderr.on('data', (d) => {
      log += d.toString();
      const m = log.match(/listening on http:\/\/[^:]+:(\d+)\/v1/);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    server.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited (${code}):\n${log}`)); });
    server.on('error', (e) => { clearTimeout(timer); reject(new Error(`cannot start ${cli}: ${e.message}`)); });
  });
  const base = `http://127.0.0.1:${port}`;
  const end = Date.now() + 60000;
  for (;;) {
    const r = await fetch(`${base}/health`).catch(() => null);
    if (r && r.status === 200) break;
    assert.ok(Date.now() < end, 'server not healthy within 60 s');
    await sleep(50);
  }
  return { server, base };
}

// SIGTERM, then the exit code must be 0 (graceful); SIGKILL after 10 s.
export async function stopServer(server) {
  if (!server || server.exitCode !== null) return;
  const exited = new Promise((resolve) => server.on('exit', (code) => resolve(code)));
  server.kill('SIGTERM');
  const code = await Promise.race([exited, sleep(10000).then(() => 'timeout')]);
  if (code === 'timeout') server.kill('SIGKILL');
  assert.equal(code, 0, 'graceful SIGTERM exits 0');
}
