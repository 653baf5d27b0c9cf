// The official MCP TypeScript SDK as a client of `ingero mcp`, for the C++ tests that drive it
// (tests/unit/mcp_sdk_test.cc, tests/bpf/mcp_real_trace_test.cc). Prints one JSON report on
// stdout; the C++ side compares its numbers with `ingero query`.
//
//   node sdk_client.mjs tools --ingero BIN --db DB [--args JSON]       stdio transport
//   node sdk_client.mjs tools --url URL [--token T] [--args JSON]       Streamable HTTP
//   node sdk_client.mjs malformed --ingero BIN --db DB                  raw bad input, stdio
//   node sdk_client.mjs malformed-http --url URL                        raw bad input, HTTP
//   node sdk_client.mjs concurrent --url URL --clients 20 --sql SQL     many clients at once
//   node sdk_client.mjs call --ingero BIN --source URL --tools A,B [--args JSON]
//                                        stdio over a fleet database: list, then call A, B
//
// --args maps a tool name to the arguments to call it with (default: {}).
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import Ajv from 'ajv';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

function opts(argv) {
  const o = { mode: argv[0] };
  for (let i = 1; i < argv.length; i += 2) o[argv[i].replace(/^--/, '')] = argv[i + 1];
  return o;
}

function transportFor(o) {
  if (o.url) {
    const headers = o.token ? { Authorization: `Bearer ${o.token}` } : {};
    return new StreamableHTTPClientTransport(new URL(o.url), { requestInit: { headers } });
  }
  const args = o.source ? ['mcp', '--source', o.source] : ['mcp', '--db', o.db];
  return new StdioClientTransport({ command: o.ingero, args, stderr: 'ignore' });
}

async function connect(o, name = 'ingero-sdk-test') {
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(transportFor(o));
  return client;
}

async function tools(o) {
  const client = await connect(o);
  const logs = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params));
  const report = {
    protocolVersion: client.transport.protocolVersion ?? null,
    serverVersion: client.getServerVersion(),
    capabilities: client.getServerCapabilities(),
    instructions: client.getInstructions(),
    tools: [],
    schemaErrors: [],
    results: {},
  };
  const ajv = new Ajv({ strict: false, allErrors: true });
  const { tools } = await client.listTools();
  for (const t of tools) {
    report.tools.push(t.name);
    for (const [which, schema] of [['inputSchema', t.inputSchema], ['outputSchema', t.outputSchema]]) {
      try {
        ajv.compile(schema);
        if (schema.type !== 'object') report.schemaErrors.push(`${t.name}.${which}: type is not object`);
      } catch (e) {
        report.schemaErrors.push(`${t.name}.${which}: ${e.message}`);
      }
    }
  }
  await client.setLoggingLevel('debug');
  const args = o.args ? JSON.parse(o.args) : {};
  for (const t of tools) {
    // callTool validates structuredContent against the tool's outputSchema and throws on a
    // mismatch: every result here passed that check.
    try {
      const r = await client.callTool({ name: t.name, arguments: args[t.name] ?? {} });
      report.results[t.name] = { isError: r.isError ?? false, structured: r.structuredContent ?? null, text: r.content?.[0]?.text ?? '' };
    } catch (e) {
      report.results[t.name] = { exception: String(e.message ?? e) };
    }
  }
  report.prompts = (await client.listPrompts()).prompts.map((p) => p.name);
  const prompt = await client.getPrompt({ name: 'investigate', arguments: { question: 'why?', since: '5m' } });
  report.promptText = prompt.messages[0].content.text;
  report.resources = (await client.listResources()).resources.map((r) => r.uri);
  const summary = await client.readResource({ uri: 'ingero://trace/summary' });
  report.summary = JSON.parse(summary.contents[0].text);
  const schema = await client.readResource({ uri: 'ingero://docs/schema' });
  report.schemaDocBytes = schema.contents[0].text.length;
  try {
    await client.readResource({ uri: 'ingero://nope' });
    report.missingResource = 'no error';
  } catch (e) {
    report.missingResource = e.code;
  }
  try {
    await client.callTool({ name: 'no_such_tool', arguments: {} });
    report.unknownTool = 'no error';
  } catch (e) {
    report.unknownTool = e.code;
  }
  const bad = await client.callTool({ name: 'get_trace_stats', arguments: { limit: 'x' } });
  report.badArguments = { isError: bad.isError, text: bad.content[0].text };
  await client.ping();
  report.logs = logs.length;
  await client.close();
  return report;
}

// Raw lines to a stdio server: every bad message gets the spec's error, and the server lives on.
async function malformed(o) {
  const child = spawn(o.ingero, ['mcp', '--db', o.db], { stdio: ['pipe', 'pipe', 'ignore'] });
  const lines = createInterface({ input: child.stdout });
  const replies = [];
  lines.on('line', (l) => replies.push(JSON.parse(l)));
  const send = (s) => child.stdin.write(s + '\n');
  const cases = [
    ['parse', '{"jsonrpc": "2.0", "id": 1, "method": '],
    ['batch', '[{"jsonrpc":"2.0","id":2,"method":"ping"}]'],
    ['no-version', '{"id":3,"method":"ping"}'],
    ['unknown-method', '{"jsonrpc":"2.0","id":4,"method":"tools/destroy"}'],
    ['bad-params', '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":"x"}'],
    ['deep', '['.repeat(10000) + ']'.repeat(10000)],
    ['before-init', '{"jsonrpc":"2.0","id":6,"method":"tools/list"}'],
  ];
  for (const [, text] of cases) send(text);
  send('{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}');
  send('{"jsonrpc":"2.0","method":"notifications/initialized"}');
  send('{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"get_trace_stats","arguments":{"limit":-1}}}');
  send('{"jsonrpc":"2.0","id":9,"method":"ping"}');
  const deadline = Date.now() + 20000;
  while (replies.length < cases.length + 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  child.stdin.end();
  const code = await new Promise((r) => child.on('exit', r));
  const byKey = {};
  let nullIds = 0;
  for (const r of replies) {
    if (r.id === null) byKey[`null${nullIds++}`] = r.error?.code ?? null;
    else byKey[r.id] = r.error ? r.error.code : 'ok';
  }
  return { replies: replies.length, codes: byKey, exitCode: code, negotiated: replies.find((r) => r.id === 7)?.result?.protocolVersion };
}

async function malformedHttp(o) {
  const post = (body, headers = {}) =>
    fetch(o.url, { method: 'POST', body, headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers } });
  const out = {};
  out.parse = (await post('{nope')).status;
  out.noSession = (await post('{"jsonrpc":"2.0","id":1,"method":"ping"}')).status;
  out.badSession = (await post('{"jsonrpc":"2.0","id":1,"method":"ping"}', { 'Mcp-Session-Id': 'x'.repeat(32) })).status;
  out.get = (await fetch(o.url)).status;
  out.wrongType = (await post('{}', { 'Content-Type': 'text/plain' })).status;
  // The server still serves an SDK client afterwards.
  const client = await connect(o);
  out.afterwards = (await client.callTool({ name: 'run_sql', arguments: { sql: 'SELECT 41 + 1 AS x' } })).structuredContent.rows[0][0];
  await client.close();
  return out;
}

async function concurrent(o) {
  const n = Number(o.clients ?? 20);
  const one = async (i) => {
    const client = await connect(o, `client-${i}`);
    const sql = await client.callTool({ name: 'run_sql', arguments: { sql: o.sql } });
    const stats = await client.callTool({ name: 'get_trace_stats', arguments: {} });
    await client.close();
    return { value: sql.structuredContent.rows[0][0], events: stats.structuredContent.events };
  };
  const results = await Promise.all(Array.from({ length: n }, (_, i) => one(i)));
  return { clients: n, values: results.map((r) => r.value), events: results.map((r) => r.events) };
}

// Lists the tools, then calls the ones named (each result checked against its outputSchema by
// the SDK).
async function call(o) {
  const client = await connect(o);
  const listed = (await client.listTools()).tools.map((t) => t.name);
  const args = o.args ? JSON.parse(o.args) : {};
  const results = {};
  for (const name of o.tools.split(',')) {
    try {
      const r = await client.callTool({ name, arguments: args[name] ?? {} });
      results[name] = { isError: r.isError ?? false, structured: r.structuredContent ?? null, text: r.content?.[0]?.text ?? '' };
    } catch (e) {
      results[name] = { exception: String(e.message ?? e) };
    }
  }
  await client.close();
  return { tools: listed, results };
}

const o = opts(process.argv.slice(2));
const modes = { tools, malformed, 'malformed-http': malformedHttp, concurrent, call };
// The report is written whole before the process exits: stdout to a pipe is asynchronous in
// Node, and process.exit() right after write() cut a report longer than the pipe's buffer
// (McpRealTrace.StdioEveryTool read "no report" once in CI).
const finish = (obj, code) => process.stdout.write(JSON.stringify(obj) + '\n', () => process.exit(code));
try {
  finish(await modes[o.mode](o), 0);
} catch (e) {
  finish({ fatal: String(e.stack ?? e) }, 1);
}
