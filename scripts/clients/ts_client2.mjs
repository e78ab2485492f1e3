// What the TypeScript SDK 2.x (@modelcontextprotocol/client, the split-package SDK) sees of two
// sessionstore instances on one engine behind a round robin, one of them restarted mid-session:
//
//   node scripts/clients/ts_client2.mjs URL ERA READY_FILE GO_FILE
//
// ERA is `legacy` (the client's default: the 2025-11-25 `initialize` handshake, so an
// Mcp-Session-Id the server keeps in the table) or `modern` (versionNegotiation pinned to
// 2026-07-28: no session in the protocol, so the `open_session` handle passed as `session_id`).
// One client, one transport, from start to finish: it lists the tools, gets its session, calls
// `note` twice, then writes READY_FILE and waits (bounded, GO_WAIT_SECONDS) for GO_FILE -- the
// caller restarts one instance in between -- calls `note` twice more and reads `notes` back.
//
// One JSON object per line on stdout, one per step (check.py asserts on them); every HTTP exchange
// is logged on stderr as "[http] METHOD what -> status ...". The SDK is loaded from
// $MCP_NODE_MODULES (default: the repository's git-ignored .node/).
// Exit status: 0 when every step ran, 1 if not, 2 on bad usage.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const nodeModules = process.env.MCP_NODE_MODULES ?? resolve(here, '../../.node/node_modules');
const require = createRequire(join(nodeModules, '_resolver.js'));
const { Client, StreamableHTTPClientTransport } = require('@modelcontextprotocol/client');
const sdkVersion = JSON.parse(
  readFileSync(join(nodeModules, '@modelcontextprotocol/client/package.json'), 'utf8')
).version;

const [url, era, readyFile, goFile] = process.argv.slice(2);
if (!url || !['legacy', 'modern'].includes(era) || !readyFile || !goFile) {
  console.error('usage: ts_client2.mjs http://127.0.0.1:PORT/mcp legacy|modern READY_FILE GO_FILE');
  process.exit(2);
}
const goWaitMs = 1000 * Number(process.env.GO_WAIT_SECONDS ?? 90);

const emit = (step, data) => console.log(JSON.stringify({ step, ...data }));

// Where each tools/call landed (the round robin names the instance in a response header), and
// whether it was sent before or after the restart.
const calls = [];
let phase = 'before';

// Every request the SDK makes, with the status and the session header, on stderr.
const loggingFetch = async (input, init = {}) => {
  const method = init.method ?? 'GET';
  const headers = new Headers(init.headers);
  let what = '';
  if (typeof init.body === 'string') {
    try {
      const body = JSON.parse(init.body);
      what = Array.isArray(body) ? 'batch' : (body.method ?? 'response');
      if (body.method === 'tools/call') what += ` ${body.params?.name}`;
    } catch {
      what = '?';
    }
  }
  const response = await fetch(input, init);
  const sent = headers.get('mcp-session-id');
  const minted = response.headers.get('mcp-session-id');
  const instance = response.headers.get('x-sessionstore-instance') ?? '?';
  if (what.startsWith('tools/call')) calls.push({ what, instance, status: response.status, phase });
  console.error(
    `[http] ${era} ${method} ${what} -> instance ${instance}, ${response.status} ${response.headers.get('content-type') ?? '-'}` +
      ` (sent session ${sent ?? '-'}, protocol ${headers.get('mcp-protocol-version') ?? '-'}` +
      `${minted && minted !== sent ? `; minted ${minted}` : ''})`
  );
  return response;
};

const errorInfo = (err) => ({
  name: err?.constructor?.name ?? typeof err,
  code: err?.code,
  message: String(err?.message ?? err),
  data: err?.data,
});

// A tool result as the caller sees it: structured content when there is some, else the text.
const shown = (result) => ({
  isError: result.isError ?? false,
  structuredContent: result.structuredContent,
  text: result.content?.map((c) => c.text ?? `<${c.type}>`),
});

const transportErrors = [];
const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: loggingFetch });
transport.onerror = (err) => transportErrors.push(errorInfo(err));
const client = new Client(
  { name: 'sessionstore-ts2-check', version: '1.0.0' },
  era === 'modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {}
);

let ok = true;
try {
  await client.connect(transport);
  emit('connect', {
    sdk: sdkVersion,
    era: client.getProtocolEra(),
    protocolVersion: client.getNegotiatedProtocolVersion(),
    server: client.getServerVersion(),
    sessionId: transport.sessionId ?? null,
  });

  const tools = await client.listTools();
  emit('tools/list', { tools: tools.tools.map((t) => t.name) });

  // The session: legacy, the transport's Mcp-Session-Id; modern, a handle from open_session.
  let handle = null;
  if (era === 'modern') {
    const opened = shown(await client.callTool({ name: 'open_session', arguments: {} }));
    emit('open_session', opened);
    handle = opened.structuredContent?.session_id;
    if (!handle) throw new Error('open_session returned no session_id');
  }
  const withSession = (args) => (handle ? { ...args, session_id: handle } : args);
  const note = async (text) =>
    emit('note', { text, ...shown(await client.callTool({ name: 'note', arguments: withSession({ text }) })) });

  await note('before restart 1');
  await note('before restart 2');
  const before = { sessionId: transport.sessionId ?? null, handle };
  emit('before-restart', before);

  // Hand over to run.sh, which restarts one instance, and wait (bounded) for it to be back.
  writeFileSync(readyFile, JSON.stringify(before) + '\n');
  const deadline = Date.now() + goWaitMs;
  while (!existsSync(goFile)) {
    if (Date.now() > deadline) throw new Error(`no ${goFile} within ${goWaitMs / 1000}s`);
    await sleep(100);
  }
  phase = 'after';
  emit('after-restart', { sessionId: transport.sessionId ?? null, handle });

  await note('after restart 1');
  await note('after restart 2');
  emit('notes', shown(await client.callTool({ name: 'notes', arguments: withSession({}) })));

  if (era === 'modern') {
    emit('close_session', shown(await client.callTool({ name: 'close_session', arguments: withSession({}) })));
  } else {
    await transport.terminateSession();
    emit('terminate', { sessionIdAfter: transport.sessionId ?? null });
  }
  await client.close();
} catch (err) {
  ok = false;
  emit('unexpected-error', { error: errorInfo(err), stack: err?.stack });
}
emit('instances', { calls });
emit('transport-errors', { errors: transportErrors });
process.exit(ok ? 0 : 1);
