// What the official TypeScript SDK (@modelcontextprotocol/sdk 1.x, a legacy-era client) sees of
// a sessionstore server:
//
//   node scripts/clients/ts_client.mjs http://127.0.0.1:PORT/mcp
//
// One JSON object per line on stdout, one per step (run.sh asserts on them); every HTTP exchange
// the SDK makes is logged on stderr as "[http] METHOD status ..." so its GET/DELETE attempts show.
// The SDK is loaded from $MCP_NODE_MODULES (default: the repository's git-ignored .node/).
// Exit status: 0 when every step ran (the post-termination call is *expected* to fail), 1 if not.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const nodeModules = process.env.MCP_NODE_MODULES ?? resolve(here, '../../.node/node_modules');
const require = createRequire(join(nodeModules, '_resolver.js'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const sdkVersion = JSON.parse(
  readFileSync(join(nodeModules, '@modelcontextprotocol/sdk/package.json'), 'utf8')
).version;

const url = process.argv[2];
if (!url) {
  console.error('usage: ts_client.mjs http://127.0.0.1:PORT/mcp');
  process.exit(2);
}

const emit = (step, data) => console.log(JSON.stringify({ step, ...data }));

// Every request the SDK makes, with the status and the session header, on stderr.
const loggingFetch = async (input, init = {}) => {
  const method = init.method ?? 'GET';
  const headers = new Headers(init.headers);
  let what = '';
  if (typeof init.body === 'string') {
    try {
      const body = JSON.parse(init.body);
      what = Array.isArray(body) ? 'batch' : (body.method ?? 'response');
    } catch {
      what = '?';
    }
  }
  const response = await fetch(input, init);
  const sent = headers.get('mcp-session-id');
  const minted = response.headers.get('mcp-session-id');
  console.error(
    `[http] ${method} ${what} -> ${response.status} ${response.headers.get('content-type') ?? '-'}` +
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

const transportErrors = [];
const newTransport = (opts = {}) => {
  const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: loggingFetch, ...opts });
  transport.onerror = (err) => transportErrors.push(errorInfo(err));
  return transport;
};

// A tool result as the caller sees it: structured content when there is some, else the text.
const shown = (result) => ({
  isError: result.isError ?? false,
  structuredContent: result.structuredContent,
  text: result.content?.map((c) => c.text ?? `<${c.type}>`),
});

let ok = true;
const client = new Client({ name: 'sessionstore-ts-check', version: '1.0.0' });
const transport = newTransport();
try {
  await client.connect(transport);
  emit('connect', {
    sdk: sdkVersion,
    protocolVersion: transport.protocolVersion,
    server: client.getServerVersion(),
    sessionId: transport.sessionId,
  });

  const tools = await client.listTools();
  emit('tools/list', { tools: tools.tools.map((t) => t.name) });

  emit('calculate', shown(await client.callTool({ name: 'calculate', arguments: { expression: '6*7' } })));
  emit('note', shown(await client.callTool({ name: 'note', arguments: { text: 'from ts' } })));
  emit('note', shown(await client.callTool({ name: 'note', arguments: { text: 'from ts' } })));
  emit('notes', shown(await client.callTool({ name: 'notes', arguments: {} })));

  const sessionId = transport.sessionId;
  emit('sessionId', { sessionId });

  await transport.terminateSession();
  emit('terminate', { sessionIdAfter: transport.sessionId ?? null });
  // The same client, still connected: its transport forgot the id, so it now POSTs with none.
  try {
    const result = await client.callTool({ name: 'notes', arguments: {} });
    emit('same-client-after-terminate', { failed: false, result: shown(result) });
  } catch (err) {
    emit('same-client-after-terminate', { failed: true, error: errorInfo(err) });
  }
  await client.close();

  // The old id again, as a client that kept it would send it: the SDK skips initialize when
  // its transport starts with a session id, so the first request carries the terminated id.
  const stale = newTransport({ sessionId });
  const again = new Client({ name: 'sessionstore-ts-check', version: '1.0.0' });
  await again.connect(stale);
  try {
    const result = await again.callTool({ name: 'notes', arguments: {} });
    emit('after-terminate', { failed: false, result: shown(result) });
  } catch (err) {
    emit('after-terminate', { failed: true, error: errorInfo(err) });
  }
  await again.close();
} catch (err) {
  ok = false;
  emit('unexpected-error', { error: errorInfo(err), stack: err?.stack });
}
emit('transport-errors', { errors: transportErrors });
process.exit(ok ? 0 : 1);
